"""Encrypting refused before the first write on a machine that cannot do it."""

from provision_agent.machine import crypt_needs
from tests.unit.plan.test_encryption import THP, build, encrypted_raid_lvm

ALL_TOOLS = {"cryptsetup", "age", "clevis", "clevis-encrypt-tpm2", "clevis-encrypt-tang"}


def _problems(doc, tools=ALL_TOOLS, devices=("/dev/tpmrm0",)):
    return crypt_needs.problems(build(doc).steps, which=lambda t: t in tools,
                                exists=lambda p: p in devices)


def test_our_ramdisk_with_a_tpm_has_all_it_needs():
    assert _problems(encrypted_raid_lvm()) == []


def test_a_tpm2_binding_on_a_machine_without_a_tpm_is_refused():
    [(name, msg)] = _problems(encrypted_raid_lvm(), devices=())
    assert name == "cryptos" and "shows no TPM" in msg


def test_missing_tools_are_named():
    doc = encrypted_raid_lvm(tang=[{"url": "http://tang:7500", "thumbprint": THP}])
    [(_, msg)] = _problems(doc, tools={"cryptsetup"})
    assert "lacks age, clevis, clevis-encrypt-tang" in msg
    assert _problems(doc, devices=()) == []         # Tang needs no TPM
