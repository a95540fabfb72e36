"""In-band inspection by our own ramdisk, in the libvirt lab (`tox -e
ironic-lab`): Ironic's `agent` inspect interface boots our ramdisk itself (managed boot: the
`ipxe` boot interface, DHCP from Ironic's dnsmasq provider) with ipa-inspection-callback-url on
its command line; our agent posts the machine's inventory; Ironic stores it and powers the
machine off. Then validate plans layouts against that inventory: one naming a disk serial the
machine does not have is refused before anything boots, one naming the first disk by its serial
deploys, and the installed system boots from that disk to its marker. (The first: SeaBIOS, like
many BIOSes, boots only the first disk of its order.)
"""

import json
import re
import time

import pytest

from tests.ironic.lab import env as lablib
from tests.vmbench import ensure_ramdisk

DEPLOY_TIMEOUT = 900
NAME = "inspected"


@pytest.fixture(scope="module")
def lab(test_os):
    opts = lablib.provision_opts(DEPLOY_TIMEOUT)
    with lablib.Lab(lablib.workdir(), ensure_ramdisk(), {NAME: "bios"}, opts,
                    serve_dir=test_os, automated_clean=False) as the_lab:
        yield the_lab


def _on_disk(serial):
    """The single-disk sample, its disk found by serial: only an inventory that lists the
    machine's serials lets validate plan it."""
    layout = json.loads((lablib.SAMPLES / "single-disk.json").read_text())
    layout["disks"][0]["match"] = {"serial": serial}
    return layout


def test_our_ramdisk_answers_inspection_and_validate_plans_the_deploy(lab, test_os):
    dom = lab.domains[NAME]
    times = {}
    uuid = lab.enroll(NAME, interfaces={"inspect": "agent"})
    lab.ironic.set_state(uuid, "manage")
    lab.ironic.wait_state(uuid, ["manageable"], 60)
    console_at = len(dom.console_text())
    t = time.monotonic()
    lab.ironic.set_state(uuid, "inspect")
    node = lab.ironic.wait_state(uuid, ["manageable", "inspect failed"], DEPLOY_TIMEOUT)
    times["inspection"] = time.monotonic() - t
    assert node["provision_state"] == "manageable", node["last_error"]
    assert node["inspection_finished_at"], node
    # Ironic booted the ramdisk itself, through its boot interface, with the callback URL.
    booted = dom.console_text()[console_at:]
    assert re.search(r"cmdline: .*ipa-inspection-callback-url=http://\S+/v1/continue_inspection",
                     booted), booted[-3000:]
    assert "provision-ironic-agent started" in booted, booted[-3000:]
    assert "boot.ipxe" in (lab.net.optsdir / f"ironic-{uuid}.conf").read_text()
    assert dom.state() == "shut off", "inspection must power the machine off at the end"

    stored = lab.ironic.get(f"/v1/nodes/{uuid}/inventory")["inventory"]
    disks = sorted((d["name"], d["serial"]) for d in stored["disks"])
    assert disks == [("/dev/vda", "disk0"), ("/dev/vdb", "disk1")], stored["disks"]
    assert dom.mac in [i["mac_address"] for i in stored["interfaces"]], stored["interfaces"]
    lab.ironic.set_state(uuid, "provide")
    lab.ironic.wait_state(uuid, ["available"], 60)

    # A layout for a disk this machine does not have: refused by validate, nothing boots.
    info = lablib.instance_info(lab, test_os, "bios", layout=_on_disk("disk7"))
    lablib.set_instance_info(lab.ironic, uuid, info)
    refused = lab.ironic.set_state(uuid, "active", ok=False)
    assert refused.status_code == 400, refused.text
    assert "does not fit this node's inspected inventory" in refused.text, refused.text
    assert "no disk matches serial='disk7'" in refused.text, refused.text
    assert "serial disk1" in refused.text, refused.text     # the machine's disks, listed
    node = lab.ironic.node(uuid)
    assert node["provision_state"] == "available"
    assert "provision_phase" not in node["driver_internal_info"]
    assert dom.state() == "shut off"

    # One for a disk it has, by serial: planned against the inventory, then deployed.
    lablib.set_instance_info(lab.ironic, uuid,
                             lablib.instance_info(lab, test_os, "bios", layout=_on_disk("disk0")))
    validated = lab.ironic.get(f"/v1/nodes/{uuid}/validate")["deploy"]
    assert validated["result"] is True, validated
    console_at = len(dom.console_text())
    t = time.monotonic()
    lab.ironic.set_state(uuid, "active")
    node = lablib.wait_state(lab.ironic, uuid, ["active"], DEPLOY_TIMEOUT + 120)
    times["deploy to active"] = time.monotonic() - t
    assert node["driver_internal_info"]["provision_exit_code"] == 0
    t = time.monotonic()
    marker = dom.wait_console(lablib.MARKER + r" mpath=\S+ root=(\S+)", 900, since=console_at)
    times["instance boot to marker"] = time.monotonic() - t
    assert marker.group(1) != "none", "the installed system did not find its configdrive"
    assert "vda" in marker.group(2), marker.group(0)
    lablib.report_times("inspection", times)
