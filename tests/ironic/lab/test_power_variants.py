"""The other ways Ironic powers and boots nodes, and how a deploy fails when it cannot: run by
`tox -e ironic-lab` (not in CI's budget; the BIOS and UEFI cycles of test_power_cycle.py are).

- IPMI (virtualbmc over the same libvirt domain) with iPXE: deploy to the instance marker;
- Redfish with plain PXE (pxelinux over TFTP; the 90 MiB initramfs crosses TFTP): the same;
- a power action the BMC refuses: `deploy failed` with the BMC's error in last_error;
- a ramdisk that never heartbeats: `deploy failed` after deploy_timeout, saying so.
"""

import os
import time

import pytest

from tests.ironic.conftest import require
from tests.ironic.lab import env as lablib
from tests.vmbench import ensure_ramdisk
from tests.vmbench.bootnet import PXELINUX_FILES

# Short, so that the ramdisk that never heartbeats fails within minutes; the deploys here
# (single-disk layout) take 3-5 min under TCG, plain PXE the longest.
DEPLOY_TIMEOUT = 420
LAYOUT = "single-disk.json"


@pytest.fixture(scope="module")
def lab(test_os):
    opts = lablib.provision_opts(DEPLOY_TIMEOUT)
    machines = {"ipmi": "bios", "pxe": "bios", "nohb": "bios", "nopower": "bios"}
    with lablib.Lab(lablib.workdir(), ensure_ramdisk(), machines, opts, serve_dir=test_os,
                    ipmi=True, automated_clean=False) as the_lab:
        yield the_lab


def _deploy_to_marker(lab, test_os, name, uuid):
    dom = lab.domains[name]
    lablib.set_instance_info(lab.ironic, uuid,
                             lablib.instance_info(lab, test_os, "bios", layout=LAYOUT))
    console_at = len(dom.console_text())
    t = time.monotonic()
    lab.ironic.set_state(uuid, "active")
    node = lablib.wait_state(lab.ironic, uuid, ["active"], DEPLOY_TIMEOUT + 120)
    deployed = time.monotonic() - t
    assert node["driver_internal_info"]["provision_exit_code"] == 0
    m = dom.wait_console(lablib.MARKER, 900, since=console_at)
    assert m.group(1) != "none"
    print(f"\n{name}: deploy to active {deployed:.0f} s, to the instance marker "
          f"{time.monotonic() - t:.0f} s")
    return node


def test_ipmi_power_with_ipxe(lab, test_os):
    uuid = lab.enroll("ipmi", power="ipmi")
    node = _deploy_to_marker(lab, test_os, "ipmi", uuid)
    assert node["power_interface"] == "ipmitool"


def test_redfish_with_pxe_over_tftp(lab, test_os):
    require(all(os.path.exists(p) for p in PXELINUX_FILES),
            f"missing: {PXELINUX_FILES} (Debian's pxelinux, syslinux-common)")
    uuid = lab.enroll("pxe", boot="pxe")
    _deploy_to_marker(lab, test_os, "pxe", uuid)
    assert "pxelinux.0" in lab.net.log_text()


def test_a_power_action_the_bmc_refuses_fails_the_deploy(lab, test_os):
    uuid = lab.enroll("nopower")
    # The BMC answers, but not for this system any more (a replaced board, a wrong id).
    lab.ironic.request("PATCH", f"/v1/nodes/{uuid}", [
        {"op": "replace", "path": "/driver_info/redfish_system_id",
         "value": "/redfish/v1/Systems/00000000-0000-0000-0000-000000000000"}])
    lablib.set_instance_info(lab.ironic, uuid,
                             lablib.instance_info(lab, test_os, "bios", layout=LAYOUT))
    t = time.monotonic()
    lab.ironic.set_state(uuid, "active")
    node = lab.ironic.wait_state(uuid, ["deploy failed", "active"], 300)
    assert node["provision_state"] == "deploy failed"
    assert "00000000-0000-0000-0000-000000000000" in node["last_error"], node["last_error"]
    print(f"\nrefused power action: deploy failed after {time.monotonic() - t:.0f} s: "
          f"{node['last_error'][:200]}")


def test_a_ramdisk_that_never_heartbeats_fails_within_the_timeout(lab, test_os):
    uuid = lab.enroll("nohb")
    # A kernel that boots no agent: the ramdisk's kernel with the kernel as its initramfs.
    lab.ironic.request("PATCH", f"/v1/nodes/{uuid}", [
        {"op": "replace", "path": "/driver_info/deploy_ramdisk",
         "value": f"file://{lab.ramdisk.kernel}"}])
    lablib.set_instance_info(lab.ironic, uuid,
                             lablib.instance_info(lab, test_os, "bios", layout=LAYOUT))
    t = time.monotonic()
    lab.ironic.set_state(uuid, "active")
    node = lab.ironic.wait_state(uuid, ["deploy failed", "active"], DEPLOY_TIMEOUT + 180)
    assert node["provision_state"] == "deploy failed"
    assert "no heartbeat from the ramdisk yet" in node["last_error"], node["last_error"]
    print(f"\nno heartbeat: deploy failed after {time.monotonic() - t:.0f} s (deploy_timeout "
          f"{DEPLOY_TIMEOUT})")
