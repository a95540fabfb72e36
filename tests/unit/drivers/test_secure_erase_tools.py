"""nvme-cli and hdparm as the secure erase reads and drives them, with a scripted runner."""

import json

import pytest

from provision_agent.drivers import ata, nvme
from provision_agent.errors import CommandError
from tests.unit.fakes import FakeRunner

HDPARM_FROZEN = """
/dev/sda:

ATA device, with non-removable media
\tModel Number:       INTEL SSDSC2CW240A3
Security:
\tMaster password revision code = 65534
\t\tsupported
\tnot\tenabled
\tnot\tlocked
\t\tfrozen
\tnot\texpired: security count
\t\tsupported: enhanced erase
\t2min for SECURITY ERASE UNIT. 4min for ENHANCED SECURITY ERASE UNIT.
Logical Unit WWN Device Identifier: 55cd2e40002f6e53
"""


def test_hdparm_security_section_is_read_word_by_word():
    state = ata.parse_security(HDPARM_FROZEN)
    assert state == {"supported": True, "enabled": False, "locked": False, "frozen": True,
                     "enhanced": True, "minutes": 4}
    assert ata.usable(state) == "ATA security is frozen"
    assert ata.usable(dict(state, frozen=False)) is None
    assert ata.parse_security("/dev/vda:\n no ATA here\n") is None
    assert ata.usable(None) == "no ATA security feature set"


def test_ata_erase_sets_the_published_password_then_erases_enhanced():
    r = FakeRunner({})
    state = dict(ata.parse_security(HDPARM_FROZEN), frozen=False)
    ata.security_erase(r, "/dev/sda", state)
    assert r.lines() == [
        "hdparm --user-master u --security-set-pass provision-erase /dev/sda",
        "hdparm --user-master u --security-erase-enhanced provision-erase /dev/sda"]


def test_a_failed_ata_erase_never_leaves_the_disk_locked_behind_our_password():
    r = FakeRunner({}, fail=("hdparm --user-master u --security-erase",))
    state = dict(ata.parse_security(HDPARM_FROZEN), frozen=False, enhanced=False)
    with pytest.raises(CommandError):
        ata.security_erase(r, "/dev/sda", state)
    assert r.lines()[-1] == "hdparm --user-master u --security-disable provision-erase /dev/sda"


@pytest.mark.parametrize("oacs, fna, want", [
    (0x17, 0x4, {"format": True, "crypto": True}),
    (0x17, 0x0, {"format": True, "crypto": False}),
    (0x0, 0x4, {"format": False, "crypto": True}),
    (0x17, 0x1, {"format": True, "crypto": False, "all_namespaces": True}),
    (0x17, 0x2, {"format": True, "crypto": False, "all_namespaces": True}),
])
def test_nvme_identify_controller_says_what_format_can_do(oacs, fna, want):
    r = FakeRunner({"nvme id-ctrl": json.dumps({"oacs": oacs, "fna": fna})})
    got = nvme.capabilities(r, "/dev/nvme0n1")
    assert {k: got[k] for k in want} == want
    assert got["all_namespaces"] is bool(fna & 0x3)
    assert r.lines() == ["nvme id-ctrl /dev/nvme0 --output-format=json"]
    assert nvme.capabilities(r, "/dev/vda") is None           # not a namespace: not asked
    assert len(r.lines()) == 1


def test_nvme_format_names_the_namespace_and_the_secure_erase_setting():
    r = FakeRunner({})
    nvme.format_erase(r, "/dev/nvme1n2", crypto=True, timeout=60)
    nvme.format_erase(r, "/dev/nvme1n2", crypto=False, timeout=60)
    assert r.lines() == ["nvme format /dev/nvme1n2 --ses=2 --force --timeout=60000",
                         "nvme format /dev/nvme1n2 --ses=1 --force --timeout=60000"]


ALL = {"format": True, "all_namespaces": True, "ns_mgmt": False, "controllers": False}
IDS = {"nvme get-ns-id /dev/nvme0n1": "nvme0n1: namespace-id:1\n",
       "nvme get-ns-id /dev/nvme0n2": "nvme0n2: namespace-id:2\n"}


def test_a_subsystem_wide_format_is_kept_to_subsystems_erased_whole():
    r = FakeRunner(dict(IDS, **{"nvme list-ns /dev/nvme0 --all": "[   0]:0x1\n[   1]:0x2\n"}))
    both = ["/dev/nvme0n1", "/dev/nvme0n2"]
    assert nvme.format_spares(r, "/dev/nvme0n1", ALL, both) is None
    why = nvme.format_spares(r, "/dev/nvme0n1", ALL, ["/dev/nvme0n1", "/dev/vda"])
    assert why.endswith("namespace ID 2 there is not being erased")
    # a namespace the host does not see (NSID 3) is not being erased either
    r = FakeRunner(dict(IDS, **{"nvme list-ns /dev/nvme0 --all": "[0]:0x1\n[1]:0x2\n[2]:0x3"}))
    assert "namespace ID 3 there" in nvme.format_spares(r, "/dev/nvme0n1", ALL, both)
    # a format that names one namespace needs no list
    r = FakeRunner({})
    assert nvme.format_spares(r, "/dev/nvme0n1", dict(ALL, all_namespaces=False), []) is None
    assert r.lines() == []


def test_without_the_subsystems_list_only_a_lone_controller_answers_for_it():
    r = FakeRunner(dict(IDS, **{"nvme list-ns /dev/nvme0 --all": (1, ""),
                                "nvme list-ns /dev/nvme0": "[   0]:0x1\n"}))
    assert nvme.format_spares(r, "/dev/nvme0n1", ALL, ["/dev/nvme0n1"]) is None
    for shared in ({"ns_mgmt": True}, {"controllers": True}):
        why = nvme.format_spares(r, "/dev/nvme0n1", dict(ALL, **shared), ["/dev/nvme0n1"])
        assert why.endswith("and which namespaces it holds cannot be read")
    r = FakeRunner(dict(IDS, **{"nvme list-ns": "something else\n"}))
    assert "cannot be read" in nvme.format_spares(r, "/dev/nvme0n1", ALL, ["/dev/nvme0n1"])
