"""One deploy cycle through a real Ironic on a provisioning network with IPv6 alone (issue 62;
`tox -e ironic-lab -- -k ipv6`, outside CI: one machine, ~8 min).

The lab's bridge has no IPv4 address and nobody serves DHCPv4 on it (Lab(ipv6_only=True),
tests/vmbench/bootnet.py): Ironic's API listens on the bridge's ULA and gives the ramdisk
`ipa-api-url=http://[ULA]:PORT`; dnsmasq sends router advertisements with the M flag and
leases addresses by stateful DHCPv6; the image and Ironic's own files are served from
`http://[ULA]:PORT/`. The ramdisk takes its DHCPv6 lease (ramdisk/netup.sh), looks the node
up and heartbeats `https://[LEASE]:22` to the API over IPv6; the conductor records that
address and runs provision over SSH to it; the image is downloaded from the IPv6 literal
URL; Ironic boots the installed system from disk to its marker.

Virtual media, not network boot: Ironic 39's `dnsmasq` DHCP provider writes the DHCPv6
boot-file options (Ironic's `59` and its `ipxe6` tag) as bare option numbers into
dhcp_optsdir, which dnsmasq reads as DHCPv4 options (DHCPv6's need `option6:`), so a UEFI
client's DHCPv6 Solicit is never told a boot file; Ironic's own comment on it says DHCPv6
through dnsmasq with iPXE's client identity does not work. Redfish virtual media (sushy-tools
inserts the ISO Ironic builds, fetched from the IPv6 URL) needs no DHCP boot options; the
address then comes from DHCPv6 as the ramdisk finds it, with no network_data on the node.
The BMC itself (sushy-tools) stays on 127.0.0.1: out of band, not the provisioning network.
"""

import ipaddress
import re
import subprocess
import time

import pytest
import requests

from tests.ironic.lab import env as lablib
from tests.ironic.lab.test_vmedia import _iso_command_line
from tests.vmbench import ensure_ramdisk

pytestmark = pytest.mark.ipv6
DEPLOY_TIMEOUT = 900
NAME = "v6-lab"


@pytest.fixture(scope="module")
def lab(test_os):
    opts = lablib.provision_opts(DEPLOY_TIMEOUT)
    with lablib.Lab(lablib.workdir(), ensure_ramdisk(), {NAME: "bios"}, opts,
                    serve_dir=test_os, automated_clean=False, ipv6_only=True) as the_lab:
        yield the_lab


def _ready_addresses(booted):
    """The READY line's addresses of the boot that deployed, by NIC."""
    line = re.findall(r"PROVISION-RAMDISK READY (.*)", booted)[-1]
    return {nic: addrs.split(",") for nic, addrs in (w.split("=", 1) for w in line.split())}


def _dhcpv6_lease(net, booted):
    """The ramdisk's addresses on the READY line and its DHCPv6 lease among them: a /128 from
    dnsmasq's range, in its lease file and log; no IPv4 address."""
    ready = _ready_addresses(booted)
    addrs = ready["ens2"]
    assert not [a for a in addrs if "." in a], ready
    leases = [ipaddress.ip_interface(a) for a in addrs if a.endswith("/128")]
    assert len(leases) == 1, ready
    lease = leases[0].ip
    assert lease in ipaddress.ip_network(f"{net.ula_prefix}/64"), lease
    assert int(lease) & 0xffff in range(0x100, 0x200), lease
    assert str(lease) in net.leases.read_text(), net.leases.read_text()
    assert "(RA: DHCPv6 stateful)" in booted and "ens2: IPv4 none; IPv6 " in booted, \
        booted[-4000:]
    assert re.search(rf"DHCPREPLY\({net.bridge}\) {lease}\b", net.log_text()), net.log_text()
    return addrs, lease


def test_deploy_with_ironic_dhcpv6_and_heartbeat_on_ipv6_alone(lab, test_os):
    dom = lab.domains[NAME]
    net = lab.net
    ula = ipaddress.IPv6Address(net.host_address)
    times = {}
    # Ironic's API answers on the ULA; the bridge has no IPv4 address at all.
    assert lab.ironic.ramdisk_api_url.startswith(f"http://[{ula}]:"), lab.ironic.ramdisk_api_url
    assert requests.get(lab.ironic.ramdisk_api_url, timeout=5).ok
    bridge = subprocess.run(["ip", "-o", "addr", "show", "dev", net.bridge],
                            capture_output=True, text=True, check=True).stdout
    assert " inet " not in bridge and f"inet6 {ula}/64" in bridge, bridge
    uuid = lab.enroll(NAME, boot="redfish-virtual-media")
    info = lablib.instance_info(lab, test_os, "bios", layout="single-disk.json")
    assert info["image_source"].startswith(f"http://[{ula}]:"), info["image_source"]
    lablib.set_instance_info(lab.ironic, uuid, info)
    console_at = len(dom.console_text())
    t = time.monotonic()
    lab.ironic.set_state(uuid, "active")
    cmdline = _iso_command_line(lab, uuid, 300)
    node = lablib.wait_state(lab.ironic, uuid, ["active"], DEPLOY_TIMEOUT + 120)
    times["deploy to active"] = time.monotonic() - t
    dii = node["driver_internal_info"]
    assert dii["provision_exit_code"] == 0, node["last_error"]
    booted = dom.console_text()[console_at:]

    assert f"ipa-api-url={lab.ironic.ramdisk_api_url}" in cmdline, cmdline
    assert "boot_method=vmedia" in cmdline, cmdline
    addrs, lease = _dhcpv6_lease(net, booted)
    # The heartbeat named that address; the conductor recorded it and ran provision over SSH
    # to [lease]:22 (the ramdisk has no other address).
    assert dii["provision_ssh_address"] == str(lease), dii
    assert re.search(rf"heartbeats from {re.escape(str(lease))} port 22\b",
                     lab.ironic.log_text()), "no heartbeat from the lease in Ironic's log"
    # The image from the IPv6 literal URL.
    assert "/root.ext4.zst" in lab.images.requested, lab.images.requested
    done = [e["kind"] for e in dii["provision_events"]
            if e["event"] == "step" and e["status"] == "done"]
    for kind in ("write_image", "bootloader", "configdrive", "fstab"):
        assert kind in done, (kind, done)

    t = time.monotonic()
    marker = dom.wait_console(lablib.MARKER, 900, since=console_at)
    times["instance boot to marker"] = time.monotonic() - t
    assert marker.group(1) != "none", "the installed system did not find its configdrive"
    print(f"\nipv6 lab: Ironic API {lab.ironic.ramdisk_api_url}, ramdisk READY "
          f"ens2={','.join(addrs)}, heartbeat/SSH {dii['provision_ssh_address']}, "
          f"image {info['image_source']}, marker {marker.group(0)}")
    lablib.report_times("ipv6", times)
