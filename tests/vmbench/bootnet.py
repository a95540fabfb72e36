"""A boot network owned by the test: a bridge carrying the conductor's address, and dnsmasq
serving DHCP and TFTP the way Ironic's `dnsmasq` DHCP provider expects to drive it.

Ironic writes one file per node MAC into dhcp_hostsdir (`MAC,set:TAG,set:ironic` while the
node network-boots, `MAC,ignore` afterwards) and the node's boot options into dhcp_optsdir
(`tag:TAG,tag:ipxe,67,http://.../boot.ipxe` ...); dnsmasq re-reads both directories when files
change. This module writes neither: it only starts dnsmasq pointed at them, with the settings
Ironic's documentation asks of the operator (`dhcp-match=set:ipxe,175` so iPXE's requests carry
the ipxe tag). MACs Ironic does not know get no address at all (`dhcp-ignore=tag:!known`).

iPXE also configures IPv6 and waited 13 s for a router advertisement on a bridge that had
none; dnsmasq answers with a stateless RA from a ULA prefix on the bridge so it stops waiting.

ipv6_only=True (issue 62's lab cycle): no IPv4 on the bridge and no DHCPv4; the host's
address (host_address) is the ULA, and dnsmasq serves stateful DHCPv6 (RAs with the M flag,
leases PREFIX::100-PREFIX::1ff, as tests/vmbench/v6net.py's "stateful" mode) to any client:
Ironic's dnsmasq provider writes DHCPv4 options only (see docs/ironic.md section 12), so no
host file would make a client "known" there.
"""

import ipaddress
import os
import subprocess
import time
from pathlib import Path

IPXE_FILES = ("/usr/lib/ipxe/undionly.kpxe", "/usr/lib/ipxe/snponly.efi")
# For Ironic's plain `pxe` boot interface (BIOS): pxelinux, when installed.
PXELINUX_FILES = ("/usr/lib/PXELINUX/pxelinux.0", "/usr/lib/syslinux/modules/bios/ldlinux.c32")


def _free_subnet():
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True,
                         check=True).stdout
    used = {ipaddress.ip_interface(line.split()[3]).network for line in out.splitlines()}
    for third in range(200, 250):
        net = ipaddress.ip_network(f"10.251.{third}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free 10.251.x.0/24 subnet for the boot network")


def _ip(*args):
    res = subprocess.run(["ip", *args], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {res.stderr.strip()}")


class BootNetwork:
    def __init__(self, workdir, ipv6_only=False):
        self.ipv6_only = ipv6_only
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.bridge = f"pabr{os.getpid() % 100000}"
        self.net = _free_subnet()
        hosts = list(self.net.hosts())
        self.host_address = str(hosts[0])
        self.range = (str(hosts[9]), str(hosts[49]))
        self.ula_prefix = f"fd00:5a:{self.net.network_address.packed[2]:x}::"
        self.ula = f"{self.ula_prefix}1"
        if ipv6_only:
            self.host_address = self.ula
        self.hostsdir = self.dir / "hostsdir"
        self.optsdir = self.dir / "optsdir"
        self.tftp_root = self.dir / "tftpboot"
        self.leases = self.dir / "dnsmasq.leases"
        self.log = self.dir / "dnsmasq.log"
        self.proc = None

    def __enter__(self):
        try:
            for d in (self.hostsdir, self.optsdir, self.tftp_root):
                d.mkdir(exist_ok=True)
            # The chain-loaders for firmware whose PXE is not iPXE (OVMF's own PXE); qemu's
            # BIOS NIC ROM is iPXE already and goes straight to boot.ipxe over HTTP.
            for f in IPXE_FILES + tuple(p for p in PXELINUX_FILES if os.path.exists(p)):
                (self.tftp_root / os.path.basename(f)).write_bytes(Path(f).read_bytes())
            _ip("link", "add", self.bridge, "type", "bridge")
            if not self.ipv6_only:
                _ip("addr", "add", f"{self.host_address}/{self.net.prefixlen}", "dev",
                    self.bridge)
            _ip("-6", "addr", "add", f"{self.ula}/64", "dev", self.bridge, "nodad")
            _ip("link", "set", self.bridge, "up")
            self.leases.write_text("")
            self.proc = subprocess.Popen([
                "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--port=0",
                f"--interface={self.bridge}", "--bind-dynamic", "--except-interface=lo",
                *self._ranges(),
                f"--dhcp-hostsdir={self.hostsdir}", f"--dhcp-optsdir={self.optsdir}",
                "--enable-tftp", f"--tftp-root={self.tftp_root}",
                "--dhcp-authoritative", f"--dhcp-leasefile={self.leases}",
                "--log-dhcp", f"--log-facility={self.log}", f"--pid-file={self.dir}/pid"],
                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
            time.sleep(0.3)
            if self.proc.poll() is not None:
                raise RuntimeError(f"dnsmasq exited with {self.proc.returncode}: "
                                   f"{self.log_text()}")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _ranges(self):
        if self.ipv6_only:
            return [f"--dhcp-range={self.ula_prefix}100,{self.ula_prefix}1ff,64,10m",
                    "--enable-ra", "--ra-param=*,5,1800"]
        return [f"--dhcp-range={self.range[0]},{self.range[1]},{self.net.netmask},10m",
                f"--dhcp-range=::,constructor:{self.bridge},ra-stateless", "--enable-ra",
                "--dhcp-option=option:router",     # no default route: only this subnet
                "--dhcp-match=set:ipxe,175", "--dhcp-userclass=set:ipxe,iPXE",
                "--dhcp-ignore=tag:!known"]

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)

    def ironic_conf(self):
        """ironic.conf sections for Ironic's dnsmasq provider and TFTP on this network."""
        return f"""[dhcp]
dhcp_provider = dnsmasq
[dnsmasq]
dhcp_hostsdir = {self.hostsdir}
dhcp_optsdir = {self.optsdir}
dhcp_leasefile = {self.leases}
[pxe]
tftp_root = {self.tftp_root}
tftp_server = {self.host_address}
"""

    def static_address(self, index=0):
        """An address on the network that DHCP never leases (for network_data)."""
        return str(list(self.net.hosts())[99 + index])

    def leased_address(self, mac):
        """The address dnsmasq gave mac, or None."""
        for line in self.leases.read_text().splitlines():
            fields = line.split()
            if len(fields) >= 3 and fields[1].lower() == mac.lower():
                return fields[2]
        return None

    def log_text(self):
        return self.log.read_text(errors="replace") if self.log.exists() else ""
