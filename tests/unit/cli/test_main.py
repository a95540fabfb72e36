import json

import pytest

from provision_agent.cli import main as cli
from tests.unit.helpers import SAMPLES, mutate, run_cli, sample


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


@pytest.mark.parametrize("extra,expected", [
    (["--plan_format", "yaml"], "--plan_format: 'yaml' is not a valid value; accepted: text, json"),
    (["--image_zero_target", "sometimes"],
     "--image_zero_target: 'sometimes' is not a valid value; accepted: auto, always, never"),
    (["--dryrun"], "--dryrun: did you mean --dry_run?"),
])
def test_bad_options_are_one_prefixed_error_with_exit_2(tmp_path, extra, expected):
    rc, out, err = run_cli(tmp_path, sample("single-disk"), extra=extra)
    assert rc == 2, err
    assert err.startswith("provision: error: ")
    assert expected in err
    # One error line and the short usage, not oslo's page-long usage dump.
    assert len(err.strip().splitlines()) == 2 and "--shell_completion" not in err


def test_bad_value_from_a_config_file_is_an_option_error(tmp_path):
    conf = tmp_path / "provision.conf"
    conf.write_text("[DEFAULT]\nplan_format = yaml\n")
    rc, _, err = run_cli(tmp_path, sample("single-disk"), extra=["--config-file", str(conf)])
    assert rc == 2 and "--plan_format" in err and "accepted: text, json" in err


def test_hyphenated_spelling_of_known_options_is_accepted(tmp_path):
    inv = SAMPLES / "inventory" / "single-disk.json"
    rc, out, err = run_cli(tmp_path, sample("single-disk"), inv="single-disk",
                           extra=["--plan-format=json", "--inventory-file", str(inv)])
    assert rc == 0, err
    assert set(json.loads(out)) == {"layout", "steps", "warnings"}


def test_bare_provision_prints_usage_with_subcommands(capsys):
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert "usage: provision [run|validate|inventory|erase|plan-schema|steps|step]" in err
    assert "--input_data_file or --input_data_url" in err


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == cli.version()


def test_inventory_refuses_an_inventory_file_it_would_ignore(tmp_path, capsys):
    inv = SAMPLES / "inventory" / "single-disk.json"
    assert cli.main(["inventory", "--inventory_file", str(inv)]) == 2
    assert "--inventory_file is for planning" in capsys.readouterr().err


def _live_machine(monkeypatch, mounted):
    """This 'machine' is samples/inventory/single-disk.json with vda3 mounted as given."""
    from provision_agent.drivers import blockinfo
    from provision_agent.plan import inventory as inv_mod
    from provision_agent.run import runner as runner_mod
    from tests.unit.fakes import FakeRunner

    tree = {"blockdevices": [{"name": "vda", "path": "/dev/vda", "type": "disk", "children": [
        {"name": "vda3", "path": "/dev/vda3", "type": "part", "fstype": "ext4"}]}]}
    fake = FakeRunner({"lsblk --json": json.dumps(tree), "pvs --reportformat": "{}"})
    disks = inv_mod.load(SAMPLES / "inventory" / "single-disk.json")
    from provision_agent.machine import disks as machine_disks
    monkeypatch.setattr(machine_disks, "discover", lambda runner=None, loops=(): disks)
    monkeypatch.setattr(blockinfo, "mounted_sources", lambda: dict(mounted))
    monkeypatch.setattr(blockinfo, "active_swaps", lambda: [])
    monkeypatch.setattr(runner_mod, "Runner", lambda: fake)
    return fake


@pytest.mark.parametrize("command", [["validate"], ["--dry_run"]])
def test_validate_and_dry_run_refuse_a_mounted_disk_on_the_live_machine(
        monkeypatch, capsys, command):
    fake = _live_machine(monkeypatch, {"/dev/vda3": "/"})
    rc = cli.main(command + ["--input_data_file", str(SAMPLES / "single-disk.json")])
    err = capsys.readouterr().err
    assert rc == 3, err
    assert "/dev/vda is in use: /dev/vda3 is mounted at /" in err
    assert fake.writes() == []


def test_dry_run_on_the_live_machine_ignores_what_a_killed_run_left_under_the_target(
        monkeypatch, capsys, tmp_path):
    _live_machine(monkeypatch, {"/dev/vda3": str(tmp_path / "target")})
    rc = cli.main(["--dry_run", "--target_root", str(tmp_path / "target"),
                   "--input_data_file", str(SAMPLES / "single-disk.json")])
    assert rc == 0, capsys.readouterr().err


def test_validate_with_an_inventory_says_which_checks_were_not_run(tmp_path, capsys):
    inv = SAMPLES / "inventory" / "single-disk.json"
    rc = cli.main(["validate", "--input_data_file", str(SAMPLES / "single-disk.json"),
                   "--inventory_file", str(inv)])
    assert rc == 0
    err = capsys.readouterr().err
    assert "need the live machine and were not run" in err and "mounted or swap" in err


@pytest.mark.parametrize("name,driver,hint", [
    ("provision", "native", "--data_driver nailgun"),
    ("ironic-layout", "native", "--data_driver ironic"),
    ("single-disk", "nailgun", "--data_driver native"),
])
def test_a_document_for_another_data_driver_says_which(tmp_path, name, driver, hint):
    rc, _, err = run_cli(tmp_path, sample(name), extra=["--data_driver", driver])
    assert rc == 2
    assert hint in err
    # Only the hint: the wrong format's schema errors would bury it.
    assert "required property" not in err and "invalid input (1)" in err


def test_unknown_data_driver_logs_no_stevedore_warning(tmp_path):
    rc, _, err = run_cli(tmp_path, sample("single-disk"), extra=["--data_driver", "nope"])
    assert rc == 2 and "WARNING" not in err and "stevedore" not in err


def test_schema_errors_say_what_is_accepted_and_suggest_field_names(tmp_path):
    doc = mutate(sample("two-disk-raid-lvm"), lambda d: (
        d["disks"][0].__setitem__("partitons", d["disks"][0].pop("partitions")),
        d["filesystems"][0].__setitem__("mountpoint", d["filesystems"][0].pop("mount")),
        d["disks"][1]["partitions"][1].__setitem__("size", "10G"),
        d["images"] if "images" in d else None))
    rc, _, err = run_cli(tmp_path, doc)
    assert rc == 2
    assert "$.disks[0]: unknown field 'partitons' (did you mean 'partitions'?)" in err
    assert "$.filesystems[0]: unknown field 'mountpoint' (did you mean 'mount'?)" in err
    assert "$.disks[1].partitions[1].size: '10G' is not valid here: expected a size" in err
    assert "10GiB" in err and "50%" in err and "remaining" in err
    assert "does not match '^" not in err      # no regular expression shown to a person


def _refusal(capsys, argv):
    rc = cli.main(argv + ["--input_data_file", str(SAMPLES / "single-disk.json")])
    err = capsys.readouterr().err.strip().splitlines()
    return rc, err[-1] if err else ""


@pytest.mark.parametrize("root", ["/", "/tmp"])
def test_dry_run_and_validate_refuse_the_target_root_the_real_run_refuses(
        monkeypatch, capsys, root):
    """The same refusal, message and exit code, with or without an inventory, and nothing run
    on the machine before it."""
    from provision_agent.drivers import target
    from provision_agent.run import apply
    fake = _live_machine(monkeypatch, {})
    monkeypatch.setattr(apply, "Runner", lambda: fake)
    with pytest.raises(target.TargetPathError) as real:
        target.check_root(root, {}, lambda source: True)
    inv = ["--inventory_file", str(SAMPLES / "inventory" / "single-disk.json")]
    for argv in ([], ["validate"], ["--dry_run"], ["validate", *inv], ["--dry_run", *inv]):
        rc, last = _refusal(capsys, argv + ["--target_root", root])
        assert (rc, last) == (real.value.exit_code, f"provision: error: {real.value}"), argv
    assert fake.calls == []


def test_dry_run_and_validate_refuse_a_target_root_mounted_from_another_disk(
        monkeypatch, capsys, tmp_path):
    from provision_agent.drivers import blockinfo
    from provision_agent.run import apply
    fake = _live_machine(monkeypatch, {})
    monkeypatch.setattr(apply, "Runner", lambda: fake)
    where = str(tmp_path / "mnt")
    monkeypatch.setattr(blockinfo, "mounts", lambda mountinfo=None: [("/dev/sdz1", where)])
    fake.answers = {"lsblk --json --inverse": json.dumps(
        {"blockdevices": [{"path": "/dev/sdz", "type": "disk"}]}), **fake.answers}
    seen = {_refusal(capsys, argv + ["--target_root", where])
            for argv in ([], ["validate"], ["--dry_run"])}
    assert seen == {(2, f"provision: error: --target_root {where} is a mount point of "
                        f"/dev/sdz1, which this plan does not provision: choose a directory of "
                        f"its own")}
    assert fake.writes() == []


def test_a_live_run_reads_where_the_partition_kept_if_present_is(monkeypatch, capsys, tmp_path):
    """preserve_ephemeral on the live machine: the disk's table, read with sfdisk, says where
    the ephemeral partition is, and the dry run shows it kept there with nothing written."""
    fake = _live_machine(monkeypatch, {})
    gib = (1 << 30) // 512
    fake.answers["sfdisk --json /dev/vda"] = json.dumps({"partitiontable": {
        "label": "dos", "sectorsize": 512, "partitions": [
            {"node": "/dev/vda1", "start": 4096, "size": gib, "type": "83"},
            {"node": "/dev/vda2", "start": 4096 + gib, "size": 2 * gib, "type": "83"}]}})
    doc = {"node_uuid": "u", "boot_mode": "bios", "properties": {"root_device": {"name": "vda"}},
           "instance_info": {"image_source": "http://h/img.raw", "image_disk_format": "raw",
                             "image_os_hash_algo": "sha256", "image_os_hash_value": "a" * 64,
                             "kernel": "http://h/k", "ramdisk": "http://h/r", "root_gb": 2,
                             "ephemeral_gb": 1, "preserve_ephemeral": "True"}}
    path = tmp_path / "node.json"
    path.write_text(json.dumps(doc))
    rc = cli.main(["--dry_run", "--plan_format", "json", "--data_driver", "ironic",
                   "--input_data_file", str(path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    steps = json.loads(out)["steps"]
    part1 = next(s["args"] for s in steps if s["kind"] == "partition"
                 and s["args"]["number"] == 1)
    assert (part1["offset"], part1["keep"]) == (4096 * 512, True)
    assert [s["args"]["keep"] for s in steps if s["kind"] == "wipe"] == [[1]]
    assert not [s for s in steps if s["kind"] == "mkfs"]
    assert fake.writes() == []


def test_a_run_does_not_look_its_version_up(monkeypatch, tmp_path):
    """The version's lookup scans every installed package's metadata (seconds under
    emulation); only --version, or what could abbreviate it, asks for it (issue 58)."""
    asked = []
    monkeypatch.setattr(cli, "version", lambda: asked.append(1) or "9.9")
    assert cli.main(["--input_data_file", str(tmp_path / "absent.json")]) == 2
    assert asked == []
    for argv in (["--version"], ["--vers"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
    assert len(asked) == 2
