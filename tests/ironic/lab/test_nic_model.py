"""A server's NIC, not virtio, through the real Ironic (issue 53): the lab's machine gets an
Intel 82574L (libvirt model e1000e, PCI 8086:10d3, bound by Linux's e1000e driver, one of the
ramdisk's server NIC families) as its only NIC. qemu's iPXE ROM for it network-boots the
ramdisk, which answers in-band inspection over it (its inventory names the NIC by PCI id and
its address), heartbeats over it, and the deploy reaches active; the installed system boots to
its marker.

`tox -e ironic-lab -- -k nic_model` (outside CI: about 6 minutes).
"""

import json
import time

import pytest

from tests.ironic.lab import env as lablib
from tests.vmbench import ensure_ramdisk
from tests.vmbench.libvirt import virsh

DEPLOY_TIMEOUT = 900
NAME = "e1000e"
MODEL = "e1000e"
PCI_ID = ("0x8086", "0x10d3")      # Intel 82574L, what qemu's e1000e emulates


@pytest.fixture(scope="module")
def lab(test_os):
    with lablib.Lab(lablib.workdir(), ensure_ramdisk(), {NAME: "bios"},
                    lablib.provision_opts(DEPLOY_TIMEOUT), serve_dir=test_os,
                    automated_clean=False, nic_model=MODEL) as the_lab:
        yield the_lab


def test_nic_model_e1000e_inspects_heartbeats_and_deploys(lab, test_os):
    dom = lab.domains[NAME]
    times = {}
    assert f"<model type='{MODEL}'/>" in virsh("dumpxml", dom.name)
    # the lab's automated_clean is off: provide, before and after inspection, cleans nothing
    uuid = lab.enroll(NAME, interfaces={"inspect": "agent"})
    lab.ironic.set_state(uuid, "manage")
    lab.ironic.wait_state(uuid, ["manageable"], 60)
    t = time.monotonic()
    lab.ironic.set_state(uuid, "inspect")
    node = lab.ironic.wait_state(uuid, ["manageable", "inspect failed"], DEPLOY_TIMEOUT)
    times["inspection"] = time.monotonic() - t
    assert node["provision_state"] == "manageable", node["last_error"]
    nics = lab.ironic.get(f"/v1/nodes/{uuid}/inventory")["inventory"]["interfaces"]
    assert len(nics) == 1, nics
    nic = nics[0]
    assert nic["mac_address"] == dom.mac and (nic["vendor"], nic["product"]) == PCI_ID, nic
    assert nic["ipv4_address"] and nic["has_carrier"], nic
    print(f"\ninspected NIC: {nic}")
    lab.ironic.set_state(uuid, "provide")
    lab.ironic.wait_state(uuid, ["available"], 60)

    layout = json.loads((lablib.SAMPLES / "single-disk.json").read_text())
    lablib.set_instance_info(lab.ironic, uuid,
                             lablib.instance_info(lab, test_os, "bios", layout=layout))
    console_at = len(dom.console_text())
    t = time.monotonic()
    lab.ironic.set_state(uuid, "active")
    node = lablib.wait_state(lab.ironic, uuid, ["active"], DEPLOY_TIMEOUT + 120)
    times["deploy to active"] = time.monotonic() - t
    dii = node["driver_internal_info"]
    assert dii["provision_exit_code"] == 0 and node["last_error"] is None, node["last_error"]
    # The heartbeat came from the address the lab's dnsmasq leased to that NIC's MAC.
    leased = lab.net.leased_address(dom.mac)
    assert leased and dii["provision_ssh_address"] == leased, (leased, dii)
    t = time.monotonic()
    marker = dom.wait_console(lablib.MARKER, 900, since=console_at)
    times["instance boot to marker"] = time.monotonic() - t
    assert marker.group(1) != "none", "the installed system did not find its configdrive"
    lablib.report_times("nic-model-e1000e", times)
