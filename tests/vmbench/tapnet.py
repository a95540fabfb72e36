"""A provisioning network for one VM: a tap device carrying the host's address, and dnsmasq
handing the VM an address by DHCP, as Ironic's dnsmasq or Neutron does for a real node.

The bench's own user-mode NIC stays (the tests' SSH and the image server go through it);
this second NIC is where the conductor reaches the ramdisk, at an address nobody knew before
the VM booted.
"""

import ipaddress
import os
import subprocess
import time
from pathlib import Path



def _used_networks():
    out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True,
                         check=True).stdout
    return {ipaddress.ip_interface(line.split()[3]).network for line in out.splitlines()}


def _free_subnet():
    used = _used_networks()
    for third in range(200, 250):
        net = ipaddress.ip_network(f"10.251.{third}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free 10.251.x.0/24 subnet for the VM's provisioning network")


class TapNetwork:
    def __init__(self, workdir, mac="52:54:00:5a:00:01"):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.mac = mac
        self.name = f"patap{os.getpid() % 100000}"
        self.net = _free_subnet()
        hosts = list(self.net.hosts())
        self.host_address = str(hosts[0])
        self.range = (str(hosts[9]), str(hosts[49]))
        self.leases = self.dir / "dnsmasq.leases"
        self.log = self.dir / "dnsmasq.log"
        self.proc = None

    def __enter__(self):
        try:
            self._ip("tuntap", "add", "dev", self.name, "mode", "tap")
            self._ip("addr", "add", f"{self.host_address}/{self.net.prefixlen}", "dev", self.name)
            self._ip("link", "set", self.name, "up")
            self.leases.write_text("")
            self.proc = subprocess.Popen([
                "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--port=0",
                f"--interface={self.name}", "--bind-dynamic", "--except-interface=lo",
                f"--dhcp-range={self.range[0]},{self.range[1]},{self.net.netmask},10m",
                "--dhcp-option=option:router",     # no default route: only this subnet
                "--dhcp-authoritative", f"--dhcp-leasefile={self.leases}",
                "--log-dhcp", f"--log-facility={self.log}", f"--pid-file={self.dir}/pid"],
                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
            time.sleep(0.3)
            if self.proc.poll() is not None:
                raise RuntimeError(f"dnsmasq exited with {self.proc.returncode}: "
                                   f"{self.log.read_text() if self.log.exists() else ''}")
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
        subprocess.run(["ip", "link", "del", self.name], capture_output=True)

    def qemu_args(self):
        """The VM's second NIC, on this network."""
        return ["-netdev", f"tap,id=prov0,ifname={self.name},script=no,downscript=no",
                "-device", f"virtio-net-pci,netdev=prov0,mac={self.mac}"]

    def leased_address(self):
        """The address dnsmasq gave the VM's NIC, or None."""
        for line in self.leases.read_text().splitlines():
            fields = line.split()
            if len(fields) >= 3 and fields[1].lower() == self.mac:
                return fields[2]
        return None

    @staticmethod
    def _ip(*args):
        res = subprocess.run(["ip", *args], capture_output=True, text=True)
        if res.returncode:
            raise RuntimeError(f"ip {' '.join(args)}: {res.stderr.strip()}")
