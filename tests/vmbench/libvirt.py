"""A machine that Ironic powers and boots for real: a libvirt domain (qemu TCG) whose power and
boot device a BMC emulator changes, with virtio disks carrying serials, one NIC on the test's
boot network and its serial console in a file.

libvirtd and virtlogd are started here when no libvirtd runs (these machines have no systemd)
and stopped by PID when the tests end; a libvirtd that was already running is used and left
alone.
"""

import os
import re
import signal
import subprocess
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from tests.vmbench import cpu

URI = "qemu:///system"
SOCKET = "/run/libvirt/libvirt-sock"
OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.fd"
OVMF_VARS = "/usr/share/OVMF/OVMF_VARS_4M.fd"
# Secure Boot (firmware "uefi-secureboot"): libvirt refuses <loader secure='yes'>, which is what
# sushy-tools writes to turn it on, unless the machine is q35 with SMM, and Debian builds the
# SMM-requiring OVMF apart. OVMF_VARS (no keys enrolled) leaves it off; the Microsoft-keyed
# store enforces it and still boots Debian's shim, which Microsoft signs.
OVMF_SECBOOT_CODE = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
OVMF_MS_VARS = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
FIRMWARES = ("bios", "uefi", "uefi-secureboot")


def virsh(*args, check=True):
    res = subprocess.run(["virsh", "-q", "-c", URI, *args], capture_output=True, text=True,
                         timeout=120)
    if check and res.returncode:
        raise RuntimeError(f"virsh {' '.join(args)}: {res.stderr.strip()}")
    return res.stdout


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


class Libvirtd:
    """libvirtd + virtlogd for the duration of a test module."""

    def __init__(self, workdir):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.started = []      # (name, pid file) of the daemons this object started

    def __enter__(self):
        if not self._answers():
            for name in ("virtlogd", "libvirtd"):
                pidfile = self.dir / f"{name}.pid"
                subprocess.run([f"/usr/sbin/{name}", "--daemon", "--pid-file", str(pidfile)],
                               check=True, timeout=60)
                self.started.append((name, pidfile))
            deadline = time.monotonic() + 30
            while not self._answers():
                if time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError("libvirtd started but does not answer on " + URI)
                time.sleep(0.3)
        return self

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def _other_users():
        """Defined domains of the labs' naming (pa-<machine>-<pid>) whose process is alive and
        not this one; leftovers of dead processes do not count."""
        names = virsh("list", "--all", "--name", check=False).split()
        users = []
        for name in names:
            m = re.fullmatch(r"pa-.+-(\d+)", name)
            if m and int(m.group(1)) != os.getpid() and _alive(int(m.group(1))):
                users.append(name)
        return users

    @staticmethod
    def _answers():
        if not os.path.exists(SOCKET):
            return False
        return subprocess.run(["virsh", "-q", "-c", URI, "version"], capture_output=True,
                              timeout=30).returncode == 0

    def close(self):
        users = self._other_users() if self.started else []
        if users:
            # Another test session's lab found our daemon answering and uses it: stopping
            # it failed that session's deploy ("client socket is closed") and orphaned its
            # qemu. Left running; the daemon is only a leftover, the VMs are someone's test.
            print(f"libvirtd left running for the domains of other processes: {users}")
            self.started = []
            return
        for name, pidfile in reversed(self.started):
            try:
                pid = int(pidfile.read_text())
            except (OSError, ValueError):
                continue
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 20
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.started = []


class StoragePool:
    """A directory pool of libvirt's for the ISOs a BMC's virtual media inserts: sushy-tools'
    libvirt driver uploads each one into the pool it is configured with (by name) and adds a
    CD-ROM with it to the domain."""

    def __init__(self, workdir, name):
        self.dir = Path(workdir)
        self.name = name

    def __enter__(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        virsh("pool-define-as", self.name, "dir", "--target", str(self.dir))
        try:
            virsh("pool-start", self.name)
        except RuntimeError:
            virsh("pool-undefine", self.name, check=False)
            raise
        return self

    def __exit__(self, *exc):
        virsh("pool-destroy", self.name, check=False)
        virsh("pool-undefine", self.name, check=False)


class Domain:
    """A libvirt domain defined (not started) with boot order network, then disk: the BMC
    powers it and sets its boot device. `firmware` is 'bios', 'uefi' (OVMF) or
    'uefi-secureboot' (OVMF that can enforce Secure Boot; off until the BMC turns it on).
    nic_model: the NIC's libvirt model (virtio, e1000e, e1000, rtl8139, vmxnet3, ...; qemu's
    iPXE ROM for that model network-boots it)."""

    def __init__(self, workdir, name, bridge, mac, disks=2, disk_size=4 << 30, firmware="bios",
                 memory_mib=2048, cpus=2, serials=None, nic_model="virtio"):
        if firmware not in FIRMWARES:
            raise ValueError(f"firmware {firmware!r}: one of {FIRMWARES}")
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.uuid = str(uuid.uuid4())
        self.bridge, self.mac, self.firmware = bridge, mac, firmware
        self.memory_mib, self.cpus = memory_mib, cpus
        self.nic_model = nic_model
        self.console_log = self.dir / "console.log"
        serials = serials or [f"disk{i}" for i in range(disks)]
        self.disk_images = [self.dir / f"{name}-disk{i}.img" for i in range(disks)]
        self.serials = serials
        self.disk_size = disk_size

    def xml(self):
        disks = "".join(f"""
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw' cache='unsafe' discard='unmap'/>
      <source file={quoteattr(str(path))}/>
      <target dev='vd{chr(ord("a") + i)}' bus='virtio'/>
      <serial>{escape(serial)}</serial>
    </disk>""" for i, (path, serial) in enumerate(zip(self.disk_images, self.serials)))
        # No loader for BIOS: sushy-tools then reports the boot mode as unknown. Declared
        # Legacy (a rom loader or firmware='bios'), every secure-boot query Ironic makes got a
        # 501 that sushy retries for 30 s; unknown costs one logged "Setting boot mode to bios
        # failed" per power-on into the ramdisk, which Ironic goes on from.
        loader, machine, smm = "", "pc", ""
        if self.uefi:
            code = OVMF_CODE
            if self.firmware == "uefi-secureboot":
                # The other UEFI machines stay on pc without SMM: what they were measured on.
                code, machine, smm = OVMF_SECBOOT_CODE, "q35", "<smm state='on'/>"
            loader = (f"<loader readonly='yes' secure='no' type='pflash'>{code}</loader>"
                      f"<nvram template='{OVMF_VARS}'>{self.dir / 'nvram.fd'}</nvram>")
        return f"""<domain type='qemu'>
  <name>{escape(self.name)}</name>
  <uuid>{self.uuid}</uuid>
  <memory unit='MiB'>{self.memory_mib}</memory>
  <vcpu>{self.cpus}</vcpu>
  <os>
    <type arch='x86_64' machine='{machine}'>hvm</type>
    {loader}
    <boot dev='network'/>
    <boot dev='hd'/>
  </os>
  <features><acpi/><apic/>{smm}</features>
  {cpu.libvirt_xml()}
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>{disks}
    <interface type='bridge'>
      <source bridge={quoteattr(self.bridge)}/>
      <mac address={quoteattr(self.mac)}/>
      <model type={quoteattr(self.nic_model)}/>
    </interface>
    <serial type='file'>
      <source path={quoteattr(str(self.console_log))} append='on'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
"""

    @property
    def uefi(self):
        return self.firmware.startswith("uefi")

    def define(self):
        for path in self.disk_images:
            with open(path, "wb") as f:
                f.truncate(self.disk_size)     # sparse
        self.console_log.touch()
        xml_file = self.dir / f"{self.name}.xml"
        xml_file.write_text(self.xml())
        virsh("define", str(xml_file))
        return self

    def firmware_config(self):
        """The persistent definition's firmware, as the BMC left it: {"machine", "smm",
        "loader", "secure", "nvram", "template"}. sushy-tools changes only this definition
        (a running domain keeps its firmware until it is started again), and renames the
        NVRAM file on every Secure Boot change, so libvirt makes a fresh one from the new
        template at the next start."""
        tree = ET.fromstring(virsh("dumpxml", "--inactive", self.name))
        loader, nvram = tree.find("os/loader"), tree.find("os/nvram")
        return {"machine": tree.find("os/type").get("machine"),
                "smm": tree.find("features/smm") is not None
                and tree.find("features/smm").get("state") == "on",
                "loader": loader.text if loader is not None else None,
                "secure": loader.get("secure") if loader is not None else None,
                "nvram": nvram.text if nvram is not None else None,
                "template": nvram.get("template") if nvram is not None else None}

    def state(self):
        return virsh("domstate", self.name, check=False).strip()

    def console_text(self):
        try:
            return self.console_log.read_text(errors="replace")
        except OSError:
            return ""

    def wait_console(self, pattern, timeout, since=0):
        """Wait for a regex in the console log after byte offset `since`; returns the match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = rx.search(self.console_text()[since:])
            if m:
                return m
            time.sleep(1)
        raise TimeoutError(f"{self.name}: no {pattern!r} on the console after {timeout} s "
                           f"(console: {self.console_log})")

    def undefine(self):
        virsh("destroy", self.name, check=False)
        flags = ["--nvram"] if self.uefi else []
        virsh("undefine", self.name, *flags, check=False)

    def remove_disks(self):
        for path in self.disk_images:
            path.unlink(missing_ok=True)
