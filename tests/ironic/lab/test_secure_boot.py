"""Secure Boot for the installed system (issue 33), through a real Ironic in the libvirt lab, on
a "uefi-secureboot" machine (q35 + SMM, Debian's Secure-Boot OVMF; tests/ironic/lab/
secureboot.py says what Ironic, sushy-tools and OVMF do with it):

- requested: the test OS flavour with Debian's signed shim and grub, deployed with
  instance_info capabilities secure_boot "true". The ramdisk network-boots with Secure Boot
  off (unsigned iPXE); Ironic's prepare_instance turns it on through Redfish before the
  reboot to disk; the installed system boots through shim and says sb=1 on its marker line.
  Undeploy turns it off again (clean_up_instance), so cleaning's ramdisk boots.
- not requested, turned on afterwards: the usual test OS (unsigned grub) deployed and booted;
  Secure Boot turned on through Ironic's API and the machine powered on: the firmware refuses
  the unsigned grub (Access Denied) and nothing boots; turned off again, the same disk boots.

`tox -e ironic-lab -- -k secure_boot` (the probe alone, 80 s: python -m
tests.ironic.lab.secureboot).
"""

import re
import time

import pytest

from tests.ironic.conftest import require
from tests.ironic.lab import env as lablib
from tests.ironic.lab import secureboot as sb
from tests.vmbench import ensure_ramdisk, testos

pytestmark = pytest.mark.secure_boot

DEPLOY_TIMEOUT = 1200
# boot-marker.sh's line; sb=1 when the installed system's efivars say SecureBoot is enabled
SB_MARKER = r"PROVISION-BOOT-OK cd=(\S+) (?:\S+ )*?sb=(\S+)"
# sushy-tools' access log (its own INFO lines are below its log level); the method is wrapped
# in colour escapes
SECURE_BOOT_PATCH = re.compile(r"PATCH /redfish/v1/Systems/([0-9a-f-]+)/SecureBoot HTTP/1\.1\S*\""
                               r" 204")


def _lab(serve_dir, automated_clean):
    require(not lablib.missing(), f"missing: {lablib.missing()}")
    require(not lablib.secure_boot_missing(), f"missing: {lablib.secure_boot_missing()}")
    return lablib.Lab(lablib.workdir(), ensure_ramdisk(), {"sb": "uefi-secureboot"},
                      lablib.provision_opts(DEPLOY_TIMEOUT), serve_dir=serve_dir, cpus=2,
                      automated_clean=automated_clean)


def _deploy(lab, test_os, uuid, capabilities=None):
    """To active; the console offset from before the deploy and the node."""
    info = lablib.instance_info(lab, test_os, "uefi")
    if capabilities:
        info["capabilities"] = capabilities       # as Nova passes a flavor's capabilities
    lablib.set_instance_info(lab.ironic, uuid, info)
    console_at = len(lab.domains["sb"].console_text())
    lab.ironic.set_state(uuid, "active")
    node = lablib.wait_state(lab.ironic, uuid, ["active"], DEPLOY_TIMEOUT + 120)
    assert node["driver_internal_info"]["provision_exit_code"] == 0, node["last_error"]
    return console_at, node


def _patches(lab, dom):
    return [m for m in SECURE_BOOT_PATCH.findall(lab.bmc.log_text()) if m == dom.uuid]


def test_secure_boot_requested_ironic_turns_it_on_and_the_signed_instance_boots():
    sb_os = testos.build_dir("secureboot")      # shim-signed, grub-efi-amd64-signed
    times = {}
    with _lab(sb_os, automated_clean=True) as lab:
        dom = lab.domains["sb"]
        t = time.monotonic()
        uuid = lab.enroll("sb", provide_timeout=DEPLOY_TIMEOUT)
        times["enroll+provide"] = time.monotonic() - t
        assert sb.firmware_state(dom) == "off" and not _patches(lab, dom)

        t = time.monotonic()
        console_at, node = _deploy(lab, sb_os, uuid, {"secure_boot": "true"})
        times["deploy to active"] = time.monotonic() - t
        # Ironic (prepare_instance → configure_secure_boot_if_needed → the redfish management
        # interface's set_secure_boot_state) PATCHed the BMC once, and sushy-tools put the
        # Microsoft-keyed NVRAM and secure loader into the definition the next start uses.
        assert f"Secure boot has been enabled for node {uuid}" in lab.ironic.log_text()
        assert len(_patches(lab, dom)) == 1
        assert lab.bmc.secure_boot(dom.uuid) is True and node["secure_boot"] is True
        assert sb.firmware_state(dom) == "on"
        assert dom.firmware_config()["nvram"].endswith(".secboot.fd")
        # The ramdisk before it had booted through unsigned iPXE: Secure Boot was off then.
        assert lablib.HOST_KEY_LINE.search(dom.console_text()[console_at:])

        t = time.monotonic()
        m = dom.wait_console(SB_MARKER, 900, since=console_at)
        times["instance boot to marker"] = time.monotonic() - t
        assert m.group(2) == "1", f"the installed system says sb={m.group(2)}"
        assert m.group(1) != "none", "the installed system did not find its configdrive"
        assert not re.search(sb.DENIED, dom.console_text()[console_at:])

        # Undeploy: clean_up_instance → deconfigure_secure_boot_if_needed while instance_info
        # still asks for it; cleaning's ramdisk then boots through unsigned iPXE again.
        cleaning_at = len(dom.console_text())
        t = time.monotonic()
        lab.ironic.set_state(uuid, "deleted")
        node = lablib.wait_state(lab.ironic, uuid, ["available"], DEPLOY_TIMEOUT + 120)
        times["undeploy + cleaning to available"] = time.monotonic() - t
        assert f"Secure boot has been disabled for node {uuid}" in lab.ironic.log_text()
        assert len(_patches(lab, dom)) == 2
        assert sb.firmware_state(dom) == "off" and node["secure_boot"] is False
        assert lablib.HOST_KEY_LINE.search(dom.console_text()[cleaning_at:])
    lablib.report_times("secure-boot-requested", times)


def test_secure_boot_turned_on_under_an_unsigned_instance_refuses_it_until_turned_off(
        test_os):
    times = {}
    with _lab(test_os, automated_clean=False) as lab:
        dom = lab.domains["sb"]
        uuid = lab.enroll("sb")
        t = time.monotonic()
        console_at, node = _deploy(lab, test_os, uuid)
        times["deploy to active"] = time.monotonic() - t
        t = time.monotonic()
        m = dom.wait_console(lablib.MARKER, 900, since=console_at)
        times["instance boot to marker"] = time.monotonic() - t
        assert m.group(1) != "none"
        # Not requested: Ironic left Secure Boot alone.
        assert not _patches(lab, dom) and sb.firmware_state(dom) == "off"

        t = time.monotonic()
        sb.set_secure_boot(lab.ironic, uuid, True)
        times["secure boot on (Ironic API)"] = time.monotonic() - t
        assert sb.firmware_state(dom) == "on"
        sb.power(lab.ironic, uuid, "power off")
        refused_at = len(dom.console_text())
        t = time.monotonic()
        sb.power(lab.ironic, uuid, "power on")
        denied = dom.wait_console(sb.DENIED, 300, since=refused_at)
        times["power on to Access Denied"] = time.monotonic() - t
        assert denied.group(2).startswith("UEFI Misc Device"), denied.group(0)  # the disk
        dom.wait_console("BdsDxe: No bootable option or device was found", 120,
                         since=refused_at)
        assert not re.search(lablib.MARKER, dom.console_text()[refused_at:])

        sb.set_secure_boot(lab.ironic, uuid, False)
        assert sb.firmware_state(dom) == "off"
        sb.power(lab.ironic, uuid, "power off")
        again_at = len(dom.console_text())
        t = time.monotonic()
        sb.power(lab.ironic, uuid, "power on")
        dom.wait_console(lablib.MARKER, 900, since=again_at)
        times["secure boot off, power on to marker"] = time.monotonic() - t
        assert not re.search(sb.DENIED, dom.console_text()[again_at:])
    lablib.report_times("secure-boot-refused", times)
