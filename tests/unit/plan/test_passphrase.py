"""LUKS opened by a passphrase typed at the console (issue 56; curtin's dm_crypt with a key):
the schema, validation (each refusal located), the plan, and the passphrase nowhere in what
provision shows: the printed and JSON plans, the log, errors; refused through Ironic."""

import json

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError
from provision_agent.plan import render
from tests.unit.helpers import run_cli
from tests.unit.plan.test_encryption import build, encrypted_raid_lvm, problems_of

SECRET = "Tr0ub4dor&3 horse-battery"


def layout(**unlock):
    """two-disk-raid-lvm with the RAID1 under LVM encrypted, opened by a passphrase."""
    return encrypted_raid_lvm(**(unlock or {"passphrase": SECRET}))


def test_a_passphrase_volume_is_planned_with_its_passphrase_shown_redacted():
    planned = build(layout())
    (fmt,) = [s for s in planned.steps if s.kind == "luks_format"]
    assert fmt.args["passphrase"] == SECRET and "clevis" not in fmt.args
    assert fmt.description == ("LUKS2 on /dev/md/os, unlocked by a passphrase typed at the "
                               "console, and a recovery key")
    (tab,) = [s for s in planned.steps if s.kind == "crypttab"]
    assert tab.args["entries"] == [{"name": "cryptos", "device": "/dev/md/os", "key_file": None,
                                    "options": "luks,initramfs", "unlock": ["passphrase"],
                                    "root": True}]
    plan = json.loads(render.plan_json(planned))
    (shown,) = [s for s in plan["steps"] if s["kind"] == "luks_format"]
    assert shown["args"]["passphrase"] == "<redacted>"
    for text in (render.plan_json(planned), render.plan_text(planned), repr(planned.steps),
                 repr(planned.resolved.layout)):
        assert SECRET not in text


def test_a_passphrase_beside_tpm2_and_tang():
    tang = [{"url": "http://tang.example:7500", "thumbprint": "x1AIFDuUJP6Nkk8-m3NvC8EZwE4"}]
    planned = build(layout(tpm2={}, tang=tang, threshold=2, passphrase=SECRET))
    (fmt,) = [s for s in planned.steps if s.kind == "luks_format"]
    assert fmt.args["clevis"]["t"] == 2 and sorted(fmt.args["clevis"]["pins"]) == ["tang", "tpm2"]
    assert fmt.args["passphrase"] == SECRET
    assert fmt.description.endswith("unlocked by 2 of TPM2 (PCRs 7), Tang "
                                    "http://tang.example:7500 or a passphrase typed at the "
                                    "console, and a recovery key")
    (tab,) = [s for s in planned.steps if s.kind == "crypttab"]
    assert tab.args["entries"][0]["unlock"] == ["tpm2", "tang", "passphrase"]


@pytest.mark.parametrize("unlock,said", [
    ({"passphrase": SECRET, "key_file": {"uri": "https://keys.example/k",
                                         "checksum": "sha256:" + "a" * 64}},
     "$.encrypted[0]: unlock: a key file opens the volume on its own, so its passphrase would "
     "never be asked for"),
    ({"passphrase": SECRET, "threshold": 2},
     "$.encrypted[0]: unlock: threshold counts tpm2 and tang methods; a passphrase alone has "
     "none"),
    ({"tpm2": {}, "threshold": 2, "passphrase": SECRET},
     "$.encrypted[0]: unlock: threshold 2 but only 1 method(s)"),
])
def test_what_cannot_open_as_written_is_refused_at_the_volume(unlock, said):
    found = problems_of(layout(**unlock))
    assert any(p.startswith(said) for p in found), found
    assert not any(SECRET in p for p in found)


@pytest.mark.parametrize("value,said", [
    ("Line\nbreak", "printable ASCII"), ("tab\there", "printable ASCII"),
    ("Ünïcödé", "printable ASCII"), ("", "printable ASCII"), ("x" * 513, "longer than 512")])
def test_the_schema_bounds_the_passphrase_and_never_echoes_it(value, said):
    with pytest.raises(InputError) as exc:
        NativeDriver(layout(passphrase=value)).layout()
    assert {p.location for p in exc.value.problems} == {"$.encrypted[0].unlock.passphrase"}
    assert said in str(exc.value)
    if value:
        assert value not in str(exc.value)


def test_the_passphrase_is_nowhere_in_what_a_dry_run_prints_or_logs(tmp_path):
    for extra in ([], ["--plan_format", "json"], ["--debug"]):
        rc, out, err = run_cli(tmp_path, layout(), extra=extra)
        assert rc == 0, err
        assert "passphrase typed at the console" in out
        assert " INFO " in err                     # the log is on stderr
        assert SECRET not in out + err
    # refused: the error names the volume, not the passphrase
    bad = layout(passphrase=SECRET, key_file={"uri": "https://keys.example/k",
                                              "checksum": "sha256:" + "a" * 64})
    rc, out, err = run_cli(tmp_path, bad)
    assert rc == 2 and "$.encrypted[0]: unlock: a key file opens" in err
    assert SECRET not in out + err


def test_through_ironic_a_passphrase_is_refused_where_it_is():
    from provision_agent.data_drivers.ironic import IronicDriver
    from tests.unit.data_drivers.test_ironic import node, problems
    doc = node()
    doc["layout"] = layout()
    found = problems(doc)
    assert any(p.startswith("layout.encrypted[0].unlock.passphrase: a passphrase is not taken "
                            "through Ironic") for p in found), found
    assert not any(SECRET in p for p in found)
    assert IronicDriver  # the driver the problems came from
