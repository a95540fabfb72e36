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
])
def test_nvme_identify_controller_says_what_format_can_do(oacs, fna, want):
    r = FakeRunner({"nvme id-ctrl": json.dumps({"oacs": oacs, "fna": fna})})
    assert nvme.capabilities(r, "/dev/nvme0n1") == want
    assert r.lines() == ["nvme id-ctrl /dev/nvme0 --output-format=json"]
    assert nvme.capabilities(r, "/dev/vda") is None           # not a namespace: not asked
    assert len(r.lines()) == 1


def test_nvme_format_names_the_namespace_and_the_secure_erase_setting():
    r = FakeRunner({})
    nvme.format_erase(r, "/dev/nvme1n2", crypto=True, timeout=60)
    nvme.format_erase(r, "/dev/nvme1n2", crypto=False, timeout=60)
    assert r.lines() == ["nvme format /dev/nvme1n2 --ses=2 --force --timeout=60000",
                         "nvme format /dev/nvme1n2 --ses=1 --force --timeout=60000"]
