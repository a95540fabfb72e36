"""Ironic's fast track in the libvirt lab: a real BMC (sushy-tools' Redfish emulator), iPXE,
Ironic's DHCP, our ramdisk on a TCG machine. `tox -e ironic-lab-fast-track`; not in CI.

One BIOS machine, its node with driver_info/fast_track (Ironic's per-node switch) and
Ironic's `agent` inspect interface, through:

  1. in-band inspection boots the ramdisk; fast track leaves the machine on and the ramdisk
     looks the node up and keeps heartbeating; a manual cleaning, provide's automated
     cleaning and the deploy then run in that same ramdisk: no Reset request at the BMC and
     no power action in Ironic's log until the deploy's reboot to disk, no second ramdisk
     boot on the console; the instance boots;
  2. undeploy, its cleaning (fast track again leaves the ramdisk running), then the machine
     switched off behind Ironic's back (virsh destroy): the deploy finds it off through the
     BMC and power-cycles it into a fresh ramdisk;
  3. fast track off for the node: undeploy and deploy, the power cycles are back.

The same decisions are proven against a real Ironic without VMs in
tests/ironic/integration/test_fast_track.py.
"""

import pathlib
import time

import pytest

from tests.ironic import realenv
from tests.ironic.lab import env as lablib
from tests.vmbench import ensure_ramdisk
from tests.vmbench.libvirt import virsh

DEPLOY_TIMEOUT = 1200
ERASE = [{"interface": "deploy", "step": "erase_devices_metadata", "args": {}}]
READY = "PROVISION-RAMDISK READY"
TIMES = {}


@pytest.fixture(scope="module")
def lab(test_os):
    ramdisk = ensure_ramdisk()
    with lablib.Lab(lablib.workdir(), ramdisk, {"ft": "bios"},
                    lablib.provision_opts(DEPLOY_TIMEOUT), serve_dir=test_os) as the_lab:
        yield the_lab
    lablib.report_times("fast-track", TIMES)


@pytest.fixture(scope="module")
def node(lab):
    uuid = lab.enroll("ft", first_cleaning=False, interfaces={"inspect": "agent"})
    _fast_track(lab, uuid, "true")
    return uuid


def _fast_track(lab, uuid, value):
    lab.ironic.request("PATCH", f"/v1/nodes/{uuid}", [
        {"op": "add", "path": "/driver_info/fast_track", "value": value}])


class Marks:
    """Where the BMC's request log, Ironic's log and the console stood."""

    def __init__(self, lab):
        self.lab = lab
        self.sushy = pathlib.Path(lab.bmc.dir) / "sushy.log"
        self.at = (len(self.sushy.read_text()), len(lab.ironic.log_text()),
                   len(lab.domains["ft"].console_text()))

    def resets(self):
        """The power requests the BMC got since (Redfish ComputerSystem.Reset)."""
        return [line for line in self.sushy.read_text()[self.at[0]:].splitlines()
                if "POST" in line and "ComputerSystem.Reset" in line]

    def power_actions(self, uuid, until):
        text = self.lab.ironic.log_text()[self.at[1]:]
        assert until in text, f"{until!r} not in Ironic's log"
        return [line.split(" by ")[-1].rstrip(".") for line in text[:text.index(until)]
                .splitlines() if f"Successfully set node {uuid} power state to" in line]

    def ramdisk_boots(self):
        return self.lab.domains["ft"].console_text()[self.at[2]:].count(READY)


def _deploy(lab, uuid, test_os):
    # Ironic clears instance_info on undeploy: each deploy sets it again, as Nova does.
    lablib.set_instance_info(lab.ironic, uuid, lablib.instance_info(lab, test_os, "bios"))
    lab.ironic.set_state(uuid, "active")
    node = lablib.wait_state(lab.ironic, uuid, ["active"], DEPLOY_TIMEOUT + 120)
    assert node["driver_internal_info"]["provision_exit_code"] == 0
    return node


def _heartbeat(ironic, node):
    return ironic.node(node)["driver_internal_info"].get("agent_last_heartbeat")


def test_inspected_cleaned_then_deployed_in_the_same_ramdisk(lab, node, test_os):
    ironic, dom = lab.ironic, lab.domains["ft"]
    ironic.set_state(node, "manage")
    lablib.wait_state(ironic, node, ["manageable"], 60)
    t = time.monotonic()
    ironic.set_state(node, "inspect")
    done = ironic.wait_state(node, ["manageable", "inspect failed"], DEPLOY_TIMEOUT)
    TIMES["inspection (ramdisk booted)"] = time.monotonic() - t
    assert done["provision_state"] == "manageable", done["last_error"]
    assert ironic.get(f"/v1/nodes/{node}/inventory")["inventory"]["disks"]
    assert dom.state() == "running"             # fast track: left on for the next job
    marks = Marks(lab)
    # the inspection's ramdisk looked the node up and heartbeats; its heartbeats go on (the
    # agent's interval is 60 s; recorded once a minute); Ironic stamps one at inspection's end
    first = _heartbeat(ironic, node)
    realenv.wait_for(lambda: _heartbeat(ironic, node) != first, 150, interval=2,
                     what="a heartbeat of the inspection's ramdisk")
    t = time.monotonic()
    ironic.request("PUT", f"/v1/nodes/{node}/states/provision",
                   {"target": "clean", "clean_steps": ERASE})
    lablib.wait_state(ironic, node, ["manageable"], DEPLOY_TIMEOUT)
    TIMES["manual cleaning, fast-tracked"] = time.monotonic() - t
    assert dom.state() == "running"
    first = _heartbeat(ironic, node)
    realenv.wait_for(lambda: _heartbeat(ironic, node) != first, 150, interval=2,
                     what="a later heartbeat of the kept ramdisk")
    t = time.monotonic()
    ironic.set_state(node, "provide")
    lablib.wait_state(ironic, node, ["available"], DEPLOY_TIMEOUT)
    TIMES["provide's cleaning, fast-tracked"] = time.monotonic() - t
    t = time.monotonic()
    done = _deploy(lab, node, test_os)
    TIMES["deploy to active, fast-tracked"] = time.monotonic() - t
    assert marks.power_actions(node, f"provision started on node {node}") == []
    assert marks.ramdisk_boots() == 0
    # the BMC's only power requests: the reboot to disk (off, then on)
    assert len(marks.resets()) == 2, marks.resets()
    print("\nfast-track start timings:",
          done["driver_internal_info"]["provision_start_timings"])
    dom.wait_console(lablib.MARKER, 900, since=marks.at[2])


def _cleaned(ironic, node):
    """An automated cleaning, which fast track leaves running: the undeploy's after the first
    test, manage and provide when this test runs alone (-k) on a node just enrolled."""
    if ironic.node(node)["provision_state"] == "active":
        ironic.set_state(node, "deleted")
    else:
        ironic.set_state(node, "manage")
        lablib.wait_state(ironic, node, ["manageable"], 60)
        ironic.set_state(node, "provide")
    lablib.wait_state(ironic, node, ["available"], DEPLOY_TIMEOUT)


def test_a_machine_switched_off_meanwhile_is_power_cycled(lab, node, test_os):
    ironic, dom = lab.ironic, lab.domains["ft"]
    _cleaned(ironic, node)
    assert dom.state() == "running"             # the cleaning's ramdisk, kept
    virsh("destroy", dom.name)                  # behind Ironic's back
    marks = Marks(lab)
    t = time.monotonic()
    _deploy(lab, node, test_os)
    TIMES["deploy to active, ramdisk gone"] = time.monotonic() - t
    assert marks.power_actions(node, f"provision started on node {node}") == ["rebooting"]
    assert marks.ramdisk_boots() == 1


def test_fast_track_off_brings_the_power_cycles_back(lab, node, test_os):
    ironic = lab.ironic
    _fast_track(lab, node, "false")
    marks = Marks(lab)
    ironic.set_state(node, "deleted")
    lablib.wait_state(ironic, node, ["available"], DEPLOY_TIMEOUT)
    t = time.monotonic()
    _deploy(lab, node, test_os)
    TIMES["deploy to active, fast track off"] = time.monotonic() - t
    # undeploy's power off, the cleaning's reboot and power off, the deploy's reboot
    assert marks.power_actions(node, f"provision started on node {node}") == \
        ["power off", "rebooting", "power off", "rebooting"]
    assert marks.ramdisk_boots() == 2
