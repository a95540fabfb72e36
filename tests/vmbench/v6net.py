"""An IPv6-only network for one VM: a bridge with the host at PREFIX::1, a tap for the VM's
NIC, and dnsmasq sending router advertisements and serving DHCPv6 the way a site does.

qemu's user networking cannot be it: its port forwarding (the bench's SSH) is IPv4's alone,
and its RA offers SLAAC only. Modes, as dnsmasq's --dhcp-range words make them:

  slaac      RA with an autonomous prefix, neither M nor O: the kernel's SLAAC alone
  stateless  RA with an autonomous prefix and the O flag (ra-stateless): SLAAC, and DNS by
             DHCPv6 information-request
  stateful   RA with the M flag and the prefix on-link only (no A flag): the address comes
             from DHCPv6, a lease from PREFIX::100-PREFIX::1ff

No IPv4 on the bridge, no DHCPv4: the ramdisk's IPv4 DHCP gets no answer.

    with V6Network(workdir, "stateful") as net:
        VM(netdev=net.netdev(), ssh_address=net.ready_address, ...)
        net.host          # fd00:6::1: where the guest reaches the host (FileServer(address=))
"""

import ipaddress
import os
import re
import subprocess
import time
from pathlib import Path

MODES = {"slaac": "ra-only", "stateless": "ra-stateless", "stateful": None}
DNS = "53"      # a DNS server address (PREFIX::53) handed out by DHCPv6; nothing answers


def _ip(*args):
    res = subprocess.run(["ip", *args], capture_output=True, text=True)
    if res.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {res.stderr.strip()}")


class V6Network:
    def __init__(self, workdir, mode="stateful", index=None):
        if mode not in MODES:
            raise ValueError(f"mode is one of {', '.join(MODES)}")
        self.mode = mode
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        n = index if index is not None else os.getpid() % 10000
        self.bridge = f"pa6br{n}"
        self.tap = f"pa6tap{n}"
        self.prefix = f"fd00:6:{n:x}::"
        self.host = f"{self.prefix}1"
        self.dns = f"{self.prefix}{DNS}"
        self.log = self.dir / "dnsmasq.log"
        self.leases = self.dir / "dnsmasq.leases"
        self.proc = None

    def dhcp_range(self):
        word = MODES[self.mode]
        if word:
            return f"{self.prefix},{word},64,10m"
        return f"{self.prefix}100,{self.prefix}1ff,64,10m"

    def __enter__(self):
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            # no IPv4 at all on this network, and no DAD wait for the host's address
            _ip("-6", "addr", "add", f"{self.host}/64", "dev", self.bridge, "nodad")
            _ip("tuntap", "add", "dev", self.tap, "mode", "tap")
            _ip("link", "set", self.tap, "master", self.bridge)
            _ip("link", "set", self.tap, "up")
            _ip("link", "set", self.bridge, "up")
            self.leases.write_text("")
            self.proc = subprocess.Popen([
                "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--port=0",
                f"--interface={self.bridge}", "--bind-dynamic", "--except-interface=lo",
                f"--dhcp-range={self.dhcp_range()}", "--enable-ra", "--ra-param=*,5,1800",
                f"--dhcp-option=option6:dns-server,[{self.dns}]",
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

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        for link in (self.tap, self.bridge):
            subprocess.run(["ip", "link", "del", link], capture_output=True)

    def netdev(self, netdev_id="n0"):
        """qemu's -netdev value for the VM's NIC on this network."""
        return f"tap,id={netdev_id},ifname={self.tap},script=no,downscript=no"

    def ready_address(self, console):
        """The guest's address on this network from its READY line: a DHCPv6 lease (/128) in
        stateful mode, the SLAAC address (/64 in the prefix) otherwise."""
        line = re.search(r"PROVISION-RAMDISK READY (.*)", console).group(1)
        want = 128 if self.mode == "stateful" else 64
        net = ipaddress.ip_network(f"{self.prefix}/64")
        for word in line.split():
            for addr in word.partition("=")[2].split(","):
                if ":" in addr and "/" in addr:
                    found = ipaddress.ip_interface(addr)
                    if found.ip in net and found.network.prefixlen == want:
                        return str(found.ip)
        raise AssertionError(f"no /{want} address in {self.prefix}/64 on the READY line: {line}")

    def log_text(self):
        return self.log.read_text(errors="replace") if self.log.exists() else ""
