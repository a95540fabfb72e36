"""Which SSH keys /init authorizes for root (issue 52 item 6): Ironic puts a node's
instance_info/kernel_append_params, which a tenant sets, on the deploy ramdisk's command line,
so booted by Ironic init ignores `sshkey=` there; the build's keys hold in every boot.

Runs init's own lines, from `mkdir -p /root/.ssh` to its warning about no key, with sh as init
does, /root/.ssh and /etc/provision moved into a temporary directory."""

import base64
import subprocess

import pytest

from tests.unit.helpers import REPO

RAMDISK = REPO / "ramdisk"
TENANT_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITENANTtenantTENANT tenant@example"
BAKED_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIconductorCONDUCTOR conductor@example"
SSHKEY = "sshkey=" + base64.b64encode(TENANT_KEY.encode()).decode()


def _key_lines():
    lines = (RAMDISK / "init").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("mkdir -p /root/.ssh"))
    end = next(i for i, ln in enumerate(lines)
               if ln.startswith("[ -s /root/.ssh/authorized_keys ]"))
    return "\n".join(lines[start:end + 1])


def _boot(tmp_path, cmdline, baked=True):
    """(authorized_keys, console) after init's key lines ran on this command line."""
    root, etc = tmp_path / "root", tmp_path / "etc"
    etc.mkdir()
    if baked:
        (etc / "authorized_keys").write_text(BAKED_KEY + "\n")
    script = (_key_lines().replace("/root/.ssh", f"{root}/.ssh")
              .replace("/etc/provision/", f"{etc}/"))
    out = subprocess.run(["sh", "-c", 'say() { echo "$*"; }; . ./cmdline.sh; cmdline=$1\n'
                          + script, "sh", cmdline],
                         capture_output=True, text=True, cwd=RAMDISK, check=False)
    keys = root / ".ssh" / "authorized_keys"
    return (keys.read_text() if keys.exists() else ""), out.stdout + out.stderr


@pytest.mark.parametrize("ironic_word", [
    "ipa-api-url=https://ironic.example:6385",
    "ipa-inspection-callback-url=https://ironic.example:6385/v1/continue_inspection",
])
@pytest.mark.parametrize("where", ["before", "after"])
def test_booted_by_ironic_a_tenants_sshkey_is_not_authorized(tmp_path, ironic_word, where):
    # PXE puts instance_info/kernel_append_params before Ironic's own words, virtual media after
    words = [SSHKEY, ironic_word] if where == "before" else [ironic_word, SSHKEY]
    keys, console = _boot(tmp_path, " ".join(["console=ttyS0", *words, "loglevel=4"]))
    assert TENANT_KEY not in keys
    assert keys == BAKED_KEY + "\n"
    assert "sshkey= ignored: booted by Ironic" in console, console


def test_booted_by_hand_sshkey_is_authorized_with_the_baked_key(tmp_path):
    keys, console = _boot(tmp_path, f"console=ttyS0 rdinit=/init {SSHKEY} ipa-agent-token=x")
    assert keys.splitlines() == [TENANT_KEY, BAKED_KEY]
    assert "ignored" not in console and "WARNING" not in console, console


def test_no_key_at_all_is_said_on_the_console(tmp_path):
    keys, console = _boot(tmp_path, f"ipa-api-url=https://ironic.example {SSHKEY}", baked=False)
    assert keys == ""
    assert "WARNING: no SSH key for root" in console, console
