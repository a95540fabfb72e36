import json

import pytest

from tests.unit.helpers import SAMPLES, mutate, run_cli, sample

from provision_agent import cli


def test_dry_run_text_for_every_native_sample(tmp_path):
    for name, inv in (("single-disk", "single-disk"), ("two-disk-raid-lvm", "three-disks"),
                      ("uefi", "single-disk")):
        rc, out, err = run_cli(tmp_path, sample(name), inv)
        assert rc == 0, err
        assert out.startswith("Layout:")
        assert "Plan (" in out


def test_dry_run_json_is_one_document_with_layout_and_steps(tmp_path):
    rc, out, _ = run_cli(tmp_path, sample("two-disk-raid-lvm"), extra=["--plan_format", "json"])
    assert rc == 0
    doc = json.loads(out)
    assert set(doc) == {"layout", "steps", "warnings"} and doc["warnings"] == []
    raids = {r["device"]: r for r in doc["layout"]["raids"]}
    assert raids["/dev/md/boot"]["members"] == ["/dev/vda2", "/dev/vdb2"]
    assert raids["/dev/md/boot"]["metadata"] == "1.0"
    kinds = [s["kind"] for s in doc["steps"]]
    assert kinds.index("settle") < kinds.index("md_create") < kinds.index("pv_create") \
        < kinds.index("mkfs") < kinds.index("mount") < kinds.index("fstab") < kinds.index("umount")
    lvs = [s["args"] for s in doc["steps"] if s["kind"] == "lv_create"]
    assert [lv["name"] for lv in lvs] == ["root", "swap", "data"]
    assert lvs[0]["size_bytes"] == 1536 * 1024 ** 2 and lvs[2]["extents"] == "100%FREE"
    mounts = [s["args"]["mount_point"] for s in doc["steps"] if s["kind"] == "mount"]
    assert mounts == ["/", "/boot", "/srv/data"]


@pytest.mark.parametrize("raw,where", [
    ("{\"version\": 1,", "input.json:1:"),
    ("[]", "$"),
])
def test_malformed_input_exits_2_without_traceback(tmp_path, raw, where):
    rc, _, err = run_cli(tmp_path, None, raw=raw)
    assert rc == 2
    assert where in err
    assert "Traceback" not in err


def test_wrong_types_exit_2_with_each_location(tmp_path):
    doc = mutate(sample("single-disk"), lambda d: (
        d.__setitem__("version", "1"),
        d["disks"][0]["partitions"][0].__setitem__("size", -3),
        d["filesystems"][0].__setitem__("mount", 5)))
    rc, _, err = run_cli(tmp_path, doc)
    assert rc == 2
    for loc in ("$.version", "$.disks[0].partitions[0].size", "$.filesystems[0].mount"):
        assert loc in err


def test_missing_disk_exits_3(tmp_path):
    rc, _, err = run_cli(tmp_path, sample("two-disk-raid-lvm"), inv="single-disk")
    assert rc == 3
    assert "$.disks[1]" in err and "no disk matches name='/dev/vdb'" in err


def test_unknown_data_driver_exits_2(tmp_path):
    rc, _, err = run_cli(tmp_path, sample("single-disk"), extra=["--data_driver", "nope"])
    assert rc == 2 and "unknown data driver 'nope'" in err


def test_missing_input_option_exits_2(capsys):
    assert cli.main(["--dry_run"]) == 2
    assert "--input_data_file" in capsys.readouterr().err


def test_validate_subcommand(tmp_path, capsys):
    inv = SAMPLES / "inventory" / "single-disk.json"
    rc = cli.main(["validate", "--input_data_file", str(SAMPLES / "single-disk.json"),
                   "--inventory_file", str(inv)])
    assert rc == 0
    assert capsys.readouterr().out.startswith("valid:")


def test_help_teaches_exit_codes(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--input_data_file" in out and "--dry_run" in out
    assert "3 the machine does not match" in out.replace("\n", " ").replace("  ", " ")


def test_debug_shows_traceback_only_when_asked(tmp_path):
    rc, _, err = run_cli(tmp_path, sample("two-disk-raid-lvm"), inv="single-disk",
                         extra=["--debug"])
    assert rc == 3 and "Traceback" in err
