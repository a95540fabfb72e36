"""Boot without DHCP or PXE, in the libvirt lab (`tox -e ironic-lab`):
Ironic's `redfish-virtual-media` boot interface builds an ISO of our kernel and initramfs
(isolinux, BIOS) with the node's network_data in it (openstack/latest/network_data.json),
and sushy-tools' libvirt driver inserts it as the machine's CD-ROM. Nobody serves the machine
DHCP (the lab's dnsmasq answers only the MACs Ironic's DHCP provider names, and this boot
interface names none), and nothing network-boots it. Our ramdisk's init finds network_data on
the boot medium, gives the NIC with the link's MAC its static address and route, and the
agent looks the node up and heartbeats with the agent token Ironic put on the ISO's kernel
command line, which never shows on the serial console. The deploy then runs as always and the
installed system boots from disk to its marker.
"""

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.ironic import guide
from tests.ironic.conftest import require
from tests.ironic.lab import env as lablib
from tests.vmbench import ensure_ramdisk

DEPLOY_TIMEOUT = 900
# Not "vmedia": Ironic 39 routes /v1/nodes/vmedia to its virtual media API, so a node of
# that name cannot be found by name (baremetal node set vmedia: 404)
NAME = "vm-lab"


@pytest.fixture(scope="module")
def lab(test_os):
    require(os.path.exists(lablib.ISOLINUX_BIN) and shutil.which("mkisofs")
            and shutil.which("isoinfo"),
            f"missing: {lablib.ISOLINUX_BIN} (Debian's isolinux), mkisofs and isoinfo "
            "(genisoimage): Ironic builds the BIOS ISO with them, the test reads it")
    opts = lablib.provision_opts(DEPLOY_TIMEOUT)
    with lablib.Lab(lablib.workdir(), ensure_ramdisk(), {NAME: "bios"}, opts,
                    serve_dir=test_os, automated_clean=False) as the_lab:
        yield the_lab


def network_data(lab, mac):
    """Nova's network_data.json format, as Ironic's API takes it for a node: the NIC's
    static address, a route beyond the lab's network and a DNS server."""
    return {"links": [{"id": "provisioning-nic", "type": "phy", "ethernet_mac_address": mac,
                       "mtu": 1500}],
            "networks": [{"id": "provisioning", "type": "ipv4", "link": "provisioning-nic",
                          "ip_address": lab.net.static_address(),
                          "netmask": str(lab.net.net.netmask),
                          "routes": [{"network": "198.51.100.0", "netmask": "255.255.255.0",
                                      "gateway": lab.net.host_address}],
                          "network_id": "provisioning"}],
            "services": [{"type": "dns", "address": lab.net.host_address}]}


def _iso(lab, uuid):
    return Path(lab.http_root) / "redfish" / f"boot-{uuid}.iso"


def _iso_command_line(lab, uuid, timeout):
    """The kernel command line of the ISO Ironic publishes for the node's ramdisk, read while
    it is there (Ironic removes it when the deploy is done)."""
    iso = _iso(lab, uuid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = subprocess.run(["isoinfo", "-R", "-i", str(iso), "-x", "/isolinux/isolinux.cfg"],
                              capture_output=True, text=True) if iso.exists() else None
        if done and done.returncode == 0 and "append" in done.stdout:
            return next(line for line in done.stdout.splitlines() if "append" in line)
        time.sleep(1)
    raise TimeoutError(f"no ISO at {iso} within {timeout} s")


def test_virtual_media_boot_with_static_network_data_and_no_dhcp(lab, test_os, tmp_path):
    dom = lab.domains[NAME]
    times = {}
    uuid = lab.enroll(NAME, boot="redfish-virtual-media")
    nd = tmp_path / "network_data.json"
    nd.write_text(json.dumps(network_data(lab, dom.mac)))
    guide.run("network-data", {"OS_AUTH_TYPE": "none", "OS_ENDPOINT": lab.ironic.url,
                               "NODE": NAME, "NETWORK_DATA": str(nd)})
    assert lab.ironic.node(uuid)["network_data"] == network_data(lab, dom.mac)
    lablib.set_instance_info(lab.ironic, uuid,
                             lablib.instance_info(lab, test_os, "bios", layout="single-disk.json"))
    console_at = len(dom.console_text())
    t = time.monotonic()
    lab.ironic.set_state(uuid, "active")
    cmdline = _iso_command_line(lab, uuid, 300)
    node = lablib.wait_state(lab.ironic, uuid, ["active"], DEPLOY_TIMEOUT + 120)
    times["deploy to active"] = time.monotonic() - t
    dii = node["driver_internal_info"]
    assert dii["provision_exit_code"] == 0, node["last_error"]
    booted = dom.console_text()[console_at:]

    # Booted from the CD-ROM Ironic's ISO went into, with the token on its command line.
    assert "boot_method=vmedia" in cmdline and "ipa-api-url=" in cmdline, cmdline
    token = re.search(r"ipa-agent-token=(\S+)", cmdline).group(1)
    assert "vmedia" in lab.bmc.log_text() or "VirtualMedia" in lab.bmc.log_text()
    # Its address came from network_data, not DHCP: the lab's dnsmasq never heard from it.
    address = lab.net.static_address()
    assert "network_data.json on the boot medium /dev/sr0" in booted, booted[-4000:]
    assert (f"network_data: ens2 ({dom.mac}): {address}/24, mtu 1500, route 198.51.100.0/24 "
            f"via {lab.net.host_address}") in booted, booted[-4000:]
    assert f"PROVISION-RAMDISK READY ens2={address}/24" in booted, booted[-4000:]
    assert not [line for line in lab.net.log_text().splitlines()
                if re.search(r"DHCP[A-Z]+\(", line) and dom.mac in line.lower()]
    assert lab.net.leased_address(dom.mac) is None
    assert not (lab.net.hostsdir / f"ironic-{dom.mac}.conf").exists() or \
        "ignore" in (lab.net.hostsdir / f"ironic-{dom.mac}.conf").read_text()
    # The heartbeat, made with the token from the ISO's command line, named that address.
    assert dii["provision_ssh_address"] == address, dii
    # The token never reached the serial console: not in the kernel's own lines (loglevel=4
    # keeps its notices, which carry the command line, off the console), not in init's.
    text = dom.console_text()
    leaked = token in text      # a bare bool: pytest's report of a failure must not show it
    assert not leaked, "the agent token is on the serial console"
    shown = re.findall(r"ipa-agent-token=(\S+)", text)
    assert shown and set(shown) == {"<redacted>"}, shown
    assert "loglevel=4" in cmdline, cmdline
    # the ISO, which holds the token too, is no longer served
    assert not _iso(lab, uuid).exists()

    t = time.monotonic()
    marker = dom.wait_console(lablib.MARKER, 900, since=console_at)
    times["instance boot to marker"] = time.monotonic() - t
    assert marker.group(1) != "none", "the installed system did not find its configdrive"
    lablib.report_times("vmedia", times)
