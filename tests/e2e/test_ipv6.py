"""The ramdisk on an IPv6-only network (issue 62): a bridge on the host with dnsmasq sending
router advertisements and serving DHCPv6 (tests/vmbench/v6net.py), no IPv4 at all. The
ramdisk takes its address the way the network offers it (ramdisk/netup.sh), says it on the
console and the READY line, the bench reaches its SSH at that address, and provision
downloads an image and its checksum file from URLs with the host's IPv6 literal and builds
the layout.

Outside CI (`tox -e e2e-ipv6`, marker ipv6): it needs a bridge, a tap and dnsmasq on the
host (root), and two boots."""

import hashlib
import ipaddress
import re
import subprocess

import pytest

from tests.vmbench import FileServer
from tests.vmbench.v6net import V6Network
from tests.vmbench.vm import VM

pytestmark = pytest.mark.ipv6
MiB = 1 << 20
QEMU_MAC = "52:54:00:12:34:56"      # qemu's MAC for the first NIC when none is given


def _slaac(prefix, mac):
    """The EUI-64 address SLAAC makes of prefix::/64 and mac (RFC 4291, appendix A)."""
    octets = [int(b, 16) for b in mac.split(":")]
    octets[0] ^= 2
    iid = bytes(octets[:3] + [0xff, 0xfe] + octets[3:])
    return ipaddress.IPv6Address(ipaddress.IPv6Address(prefix).packed[:8] + iid)


def _ready_words(vm):
    line = re.search(r"PROVISION-RAMDISK READY (.*)", vm.console_text()).group(1)
    return dict(w.split("=", 1) for w in line.split())


def _tar(tmp_path, served):
    tree = tmp_path / "rootfs"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc" / "hostname").write_text("over-ipv6\n")
    (tree / "blob").write_bytes(b"\x5a" * (3 * MiB))
    tar = served / "rootfs.tar.zst"
    subprocess.run(["tar", "--zstd", "-C", str(tree), "-cf", str(tar), "."], check=True)
    digest = hashlib.sha256(tar.read_bytes()).hexdigest()
    (served / "SHA256SUMS").write_text(f"{digest}  {tar.name}\n")
    return tar


def test_stateful_dhcpv6_address_and_an_image_from_an_ipv6_literal(ramdisk, tmp_path):
    served = tmp_path / "srv"
    served.mkdir()
    tar = _tar(tmp_path, served)
    with V6Network(tmp_path / "net", "stateful") as net, \
            FileServer(served, address=net.host) as srv:
        vm = VM(disks=1, disk_size="2G", name="ipv6-stateful", ramdisk=ramdisk,
                netdev=net.netdev(), ssh_address=net.ready_address)
        with vm:
            nic, addrs = next(iter(_ready_words(vm).items()))
            leased = net.ready_address(vm.console_text())
            print(f"ipv6 stateful: READY {nic}={addrs}; SSH to {leased}; boot "
                  f"{vm.boot_seconds} s")
            # the lease dnsmasq handed out, from its range, as a /128; no IPv4 anywhere
            assert int(leased.rsplit(":", 1)[1], 16) in range(0x100, 0x200), addrs
            assert leased in net.leases.read_text(), net.leases.read_text()
            assert not re.search(r"\d+\.\d+\.\d+\.\d+/", addrs), addrs
            assert f"network: {nic}: IPv4 none; IPv6 " in vm.console_text()
            assert "(RA: DHCPv6 stateful)" in vm.console_text()
            url = srv.url(tar.name)
            assert url.startswith(f"http://[{net.host}]:"), url
            doc = {"version": 1,
                   "disks": [{"id": "d0", "match": {"name": "/dev/vda"}, "table": "gpt",
                              "partitions": [{"id": "root", "size": "remaining",
                                              "type": "linux", "name": "root"}]}],
                   "filesystems": [{"device": "root", "type": "ext4", "mount": "/",
                                    "label": "root"}],
                   "images": [{"uri": url, "format": "tar", "target": "/",
                               "checksum_url": srv.url("SHA256SUMS")}]}
            run = vm.provision(doc, ["--debug"])
            assert run.returncode == 0, run.stderr[-3000:] + "\n" + run.log[-3000:]
            assert {"/SHA256SUMS", "/" + tar.name} <= set(srv.requested), srv.requested
            assert vm.ssh("lsblk -rno NAME,PARTLABEL /dev/vda").stdout.split() == \
                ["vda", "vda1", "root"]
            vm.ssh("mkdir -p /mnt/r && mount -o ro /dev/vda1 /mnt/r")
            try:
                assert vm.read_text("/mnt/r/etc/hostname") == "over-ipv6\n"
                assert vm.sha256("/mnt/r/blob") == hashlib.sha256(b"\x5a" * (3 * MiB)).hexdigest()
            finally:
                vm.ssh("umount /mnt/r")


def test_slaac_with_stateless_dhcpv6(ramdisk, tmp_path):
    with V6Network(tmp_path / "net", "stateless") as net:
        vm = VM(disks=1, disk_size="1G", name="ipv6-stateless", ramdisk=ramdisk,
                netdev=net.netdev(), ssh_address=net.ready_address)
        with vm:
            nic, addrs = next(iter(_ready_words(vm).items()))
            print(f"ipv6 stateless: READY {nic}={addrs}; boot {vm.boot_seconds} s")
            # SLAAC's EUI-64 address of qemu's MAC in the advertised prefix
            assert addrs == f"{_slaac(net.prefix, QEMU_MAC)}/64", addrs
            assert net.ready_address(vm.console_text()) == str(_slaac(net.prefix, QEMU_MAC))
            assert "(RA: SLAAC, DHCPv6 stateless)" in vm.console_text()
            # what only the stateless DHCPv6 exchange brings: the DNS server
            assert f"nameserver {net.dns}" in vm.read_text("/etc/resolv.conf")
            route = vm.ssh(["ip", "-6", "route", "get", net.host]).stdout
            assert f"dev {nic}" in route, route
