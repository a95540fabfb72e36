"""One qemu VM booting the provision ramdisk (or its own disks), always torn down.

TCG only (no usable KVM on these hosts), user networking with SSH forwarded to 127.0.0.1 on a
free port, sparse raw disks with serial numbers, the serial console written to a log file that
is kept under artifacts/.
"""

import base64
import ctypes
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tenacity

from tests.vmbench import cpu
from tests.vmbench.guest import GuestQueries
from tests.vmbench.ramdisk import REPO_ROOT, client_key, ensure_ramdisk
from tests.vmbench.ssh import SSH, GuestCommandError

READY_LINE = "PROVISION-RAMDISK READY"
HOST_KEY_LINE = re.compile(r"ssh host public key: (ssh-[a-z0-9-]+ [A-Za-z0-9+/=]+)")
EMERGENCY = "You are in emergency mode"
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.fd"
OVMF_VARS = "/usr/share/OVMF/OVMF_VARS_4M.fd"
# firmware="uefi-secureboot": Debian's OVMF built with Secure Boot (it needs SMM, so q35, and
# its flash is writable from SMM only) and a variable store with Microsoft's keys enrolled and
# Secure Boot enforced, the state OEM firmware ships in
OVMF_SB_CODE = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
OVMF_SB_VARS = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"


# Storage controllers qemu emulates, by the bus name a VM's disks give (see _hba_args)
HBA_MODELS = {"megasas": "megasas-gen2", "mptsas": "mptsas1068", "lsi": "lsi53c895a",
              "pvscsi": "pvscsi", "ahci": "ahci", "usb": "qemu-xhci"}


def parse_size(size):
    """'4G' -> bytes (binary units, like qemu-img and truncate)."""
    if isinstance(size, int):
        return size
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(i?B)?\s*", str(size), re.IGNORECASE)
    if not m:
        raise ValueError(f"bad size {size!r}")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def scsi_wwn(serial):
    """A NAA-5 WWN derived from the serial, so a disk keeps its WWN (and multipath WWID) when it
    is booted again with a path less."""
    return "0x5" + hashlib.sha256(serial.encode()).hexdigest()[:15]


def blkdebug_config(rules):
    """qemu blkdebug's rule file (docs/devel/blkdebug.txt): one [inject-error] section per
    rule, a dict of its keys. Defaults: a write (iotype) failing with EIO (errno 5) on every
    request that covers `sector` (512-byte units of the image), every time (once off). The
    raw format driver raises the write_aio/read_aio events the rule waits for."""
    out = []
    for rule in rules:
        rule = {"event": "write_aio", "iotype": "write", "errno": 5, "once": "off",
                "immediately": "off", **rule}
        if rule["iotype"] == "read" and rule["event"] == "write_aio":
            rule["event"] = "read_aio"
        out += ["[inject-error]"] + [f'{k} = "{v}"' for k, v in rule.items()] + [""]
    return "\n".join(out)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Disk:
    path: Path
    size: int
    serial: str


@dataclass(frozen=True)
class ProvisionRun:
    returncode: int
    stdout: str
    stderr: str
    log: str
    clock: tuple = None     # (start, end) on the guest's clock, with provision(clock=True)



def _die_with_parent():
    """In the qemu child: get SIGKILL when the test process dies, even by SIGKILL or a CI
    timeout, so that no orphaned VM keeps eating the CPU of the tests after it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)    # PR_SET_PDEATHSIG

class VMError(RuntimeError):
    pass


class QMPError(VMError):
    pass


class VM(GuestQueries):
    """See tests/vmbench/README.md for the whole API; the short form:

        with VM(disks=3, disk_size="4G") as vm:
            vm.ssh("lsblk")                    # -> Result(returncode, stdout, stderr)
            run = vm.provision(doc, ["--debug"])  # -> ProvisionRun(returncode, ..., log)
            vm.stop()
            inspect vm.disk_images            # the raw files, still there until the with ends
    """

    def __init__(self, disks=3, disk_size="4G", *, serials=None, disk_images=None, bus="virtio",
                 name="vm", memory=2048, cpus=None, boot="ramdisk", firmware="bios", ramdisk=None,
                 append="", ready_timeout=None, keep_disks=False, artifacts=None,
                 extra_args=(), tpm=None, console_input=False, nvram=None,
                 nic="virtio-net-pci", block_size=None, netdev=None, ssh_address=None,
                 io_errors=None, qmp=False):
        if boot not in ("ramdisk", "disk"):
            raise ValueError("boot is 'ramdisk' (direct kernel boot) "
                             "or 'disk' (firmware boots the disks)")
        self.name = name
        self.bus = bus
        self.memory = memory
        self.cpus = cpus or int(os.environ.get("VMBENCH_CPUS", 2))
        self.boot = boot
        self.firmware = firmware
        self.append = append
        self.extra_args = list(extra_args)     # more qemu arguments, e.g. a second NIC
        self.nic = nic                  # qemu's NIC model for the first NIC: e1000, vmxnet3, ...
        # the first NIC's -netdev instead of user networking (e.g. a tap on a test bridge),
        # with ssh_address(console text) -> the address the bench's SSH reaches port 22 at
        # once READY (v6net.V6Network gives both)
        self.netdev = netdev
        self.ssh_address = ssh_address
        # the disks' logical/physical block sizes: None (qemu's 512), 4096 (4Kn), a pair
        # (512, 4096) for 512e, or a list with one of those per disk
        self.block_size = block_size
        # {disk index: [rule, ...]}: that disk goes through qemu's blkdebug driver, which fails
        # the requests a rule matches with an errno (blkdebug_config says how)
        self.io_errors = io_errors or {}
        self.tpm = tpm                  # a tpm.SoftTPM: the VM's TPM 2.0
        # a QMP monitor on a unix socket in the work directory: qmp() (faults: a disk's
        # throttle, device_del)
        self.qmp_socket = None
        if qmp:
            self.qmp_socket = "qmp.sock"
        # UEFI: the variable store to start from (a copy of it), e.g. another VM's
        # nvram_file after it ran: its boot entries; default: the firmware's empty one
        self.nvram = nvram
        # the serial console also takes input (type_console): a passphrase prompt at boot
        self.console_input = console_input
        self.keep_disks = keep_disks
        # FIELD_NOTES: ~30 s to SSH under TCG on an idle 2-core host; CI runs other jobs too.
        self.ready_timeout = ready_timeout or int(os.environ.get("VMBENCH_READY_TIMEOUT", 240))
        self.ramdisk = ramdisk or (ensure_ramdisk() if boot == "ramdisk" else None)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        root = Path(artifacts or os.environ.get("VMBENCH_ARTIFACTS")
                    or REPO_ROOT / "artifacts" / "vmbench")
        self.artifacts = root / f"{name}-{stamp}-{os.getpid()}-{id(self) % 10000}"
        self.workdir = Path(tempfile.mkdtemp(prefix=f"vmbench-{name}-",
                                             dir=os.environ.get("VMBENCH_TMP", "/var/tmp")))
        self._disk_args = (disk_images, disks, disk_size, serials)
        self.disks = []
        self.proc = None
        self.port = None
        self._ssh = None
        self.boot_seconds = None
        self.host_public_key = None    # the key the ramdisk printed on its console, once READY
        self.last_provision_log = ""
        self._runs = 0

    # ---- lifecycle ---------------------------------------------------------------------------
    def __enter__(self):
        try:
            self.start()
            if self.boot == "ramdisk":
                self.wait_ready()
        except BaseException:
            self.report_failure()
            self.close()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.report_failure()
        self.close()
        return False

    def start(self):
        self.artifacts.mkdir(parents=True, exist_ok=True)
        self.disks = self._make_disks(*self._disk_args)
        self.console_log = self.artifacts / "console.log"
        # The free port can be taken by someone else before qemu binds it: then try another.
        for _ in range(3):
            self.port = free_port()
            self._launch()
            time.sleep(0.5)
            if self.running() or "hostfwd" not in (self.artifacts / "qemu.log").read_text():
                break
        if self.ramdisk and self.boot == "ramdisk":    # a disk-booted OS has no bench SSH to ask
            self._pin(self.ramdisk.host_public_key)
            self._ssh = SSH(self.port, client_key(), self.workdir / "known_hosts")

    def _pin(self, public_key, host="127.0.0.1", port=None):
        fields = public_key.split()
        port = port or self.port
        # known_hosts' form: a bare address for port 22 (an IPv6 one too), [host]:port else
        name = host if port == 22 else f"[{host}]:{port}"
        (self.workdir / "known_hosts").write_text(f"{name} {fields[0]} {fields[1]}\n")

    def _launch(self):
        argv = self.qemu_argv()
        if self.tpm:
            argv += self.tpm.start(self.workdir)    # a swtpm for this qemu run
        (self.artifacts / "qemu-argv.txt").write_text(" ".join(argv) + "\n")
        self._started = time.monotonic()
        with open(self.artifacts / "qemu.log", "w") as qlog:
            stdin = subprocess.PIPE if self.console_input else subprocess.DEVNULL
            self.proc = subprocess.Popen(argv, stdin=stdin, stdout=qlog,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=_die_with_parent)

    def qemu_argv(self):
        argv = ["qemu-system-x86_64", "-name", self.name, "-accel", "tcg",
                "-cpu", cpu.model(),
                "-smp", str(self.cpus), "-m", str(self.memory), "-nographic", "-nodefaults",
                *self._serial_args(), "-no-reboot",
                "-netdev", self.netdev or f"user,id=n0,hostfwd=tcp:127.0.0.1:{self.port}-:22",
                "-device", f"{self.nic},netdev=n0"]
        if "sata" in self.buses():
            # q35's ICH9 AHCI sits at 0000:00:1f.2, the by-path names Fuel documents use
            argv += ["-machine", "q35"]
        argv += self.extra_args
        if self.qmp_socket:
            argv += ["-qmp", f"unix:{self.workdir / self.qmp_socket},server=on,wait=off"]
        if self.firmware in ("uefi", "uefi-secureboot"):
            secure = self.firmware == "uefi-secureboot"
            vars_copy = self.nvram_file
            shutil.copy(self.nvram or (OVMF_SB_VARS if secure else OVMF_VARS), vars_copy)
            if secure:
                argv += ["-machine", "q35,smm=on",
                         "-global", "driver=cfi.pflash01,property=secure,value=on"]
            argv += ["-drive", f"if=pflash,format=raw,readonly=on,"
                               f"file={OVMF_SB_CODE if secure else OVMF_CODE}",
                     "-drive", f"if=pflash,format=raw,file={vars_copy}"]
        if self.boot == "ramdisk":
            key = base64.b64encode(client_key().with_suffix(".pub").read_bytes().strip()).decode()
            cmdline = f"console=ttyS0 rdinit=/init panic=-1 sshkey={key} {self.append}".strip()
            argv += ["-kernel", str(self.ramdisk.kernel), "-initrd", str(self.ramdisk.initramfs),
                     "-append", cmdline]
        buses = self.buses()
        if {"scsi", "multipath"} & set(buses):
            argv += ["-device", "virtio-scsi-pci,id=scsi0"]
        if "multipath" in buses:
            # the second path through its own HBA, as a dual-ported SAS disk or a SAN LUN has
            argv += ["-device", "virtio-scsi-pci,id=scsi1"]
        argv += self._hba_args(buses)
        for i, (disk, bus) in enumerate(zip(self.disks, buses)):
            drive = f"file={disk.path},format=raw,if=none,cache=unsafe,discard=unmap"
            if bus == "multipath":
                # Two SCSI devices with one serial and WWN over one image file: the guest sees
                # the same LUN twice (sdX, sdY), as multipathd must group it.
                for path, hba in (("a", "scsi0"), ("b", "scsi1")):
                    argv += ["-drive", f"{drive},id=d{i}{path},file.locking=off"]
                    index = i if path == "a" else None
                    argv += ["-device", self._scsi_device(f"d{i}{path}", hba, disk, index)
                             + ",share-rw=on"]
                continue
            if i in self.io_errors:
                drive = drive.replace(f"file={disk.path}",
                                      f"file=blkdebug:{self._blkdebug_config(i)}:{disk.path}")
            argv += ["-drive", f"{drive},id=d{i}"]
            for device in self._with_block_size(i, self._disk_device(i, disk, bus)):
                argv += ["-device", device]
        return argv

    def _blkdebug_config(self, i):
        path = self.workdir / f"blkdebug-{i}.conf"
        path.write_text(blkdebug_config(self.io_errors[i]))
        return path

    @property
    def nvram_file(self):
        """The UEFI variables this VM's firmware writes (its NVRAM), kept with its disks."""
        return self.workdir / "OVMF_VARS.fd"

    def _serial_args(self):
        if not self.console_input:
            return ["-serial", f"file:{self.console_log}"]
        # qemu's stdin is the console's keyboard; the log still gets every byte it prints
        return ["-chardev", f"stdio,id=ser0,signal=off,logfile={self.console_log}",
                "-serial", "chardev:ser0"]

    def type_console(self, text):
        """Type text on the serial console (a VM made with console_input=True)."""
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def buses(self):
        """The bus of each disk: `bus` is one name for all, or a list with one per disk."""
        if isinstance(self.bus, (list, tuple)):
            if len(self.bus) != len(self.disks or self.bus):
                raise ValueError("one bus per disk")
            return list(self.bus)
        return [self.bus] * len(self.disks)

    def _boot_index(self, i):
        return f",bootindex={i + 1}" if self.boot == "disk" and i is not None else ""

    def _scsi_device(self, drive, hba, disk, i):
        return (f"scsi-hd,drive={drive},bus={hba}.0,serial={disk.serial},"
                f"wwn={scsi_wwn(disk.serial)}"
                f"{self._boot_index(i)}")

    def _hba_args(self, buses):
        """One controller per emulated HBA bus in use (megasas, mptsas, lsi, pvscsi, ahci,
        usb): the storage controllers qemu emulates, each driven by its own kernel driver."""
        argv = []
        for bus in dict.fromkeys(buses):
            if bus in HBA_MODELS:
                argv += ["-device", f"{HBA_MODELS[bus]},id={bus}0"]
        return argv

    def _hba_device(self, i, disk, bus):
        """A disk behind one of HBA_MODELS: SCSI disks with serial and WWN; AHCI and USB ports
        numbered among that bus's disks."""
        if bus in ("megasas", "mptsas", "lsi", "pvscsi"):
            return self._scsi_device(f"d{i}", f"{bus}0", disk, i)
        port = self.buses()[:i].count(bus)
        if bus == "ahci":
            return (f"ide-hd,drive=d{i},bus=ahci0.{port},serial={disk.serial}"
                    f"{self._boot_index(i)}")
        # a USB mass-storage device (a stick): qemu's default is not flagged removable, as a
        # USB hard disk is not; the transport says what it is
        return f"usb-storage,drive=d{i},bus=usb0.0,port={port + 1},serial={disk.serial}"

    def _disk_device(self, i, disk, bus):
        if bus in HBA_MODELS:
            return self._hba_device(i, disk, bus)
        boot = self._boot_index(i)
        if bus == "virtio":
            return f"virtio-blk-pci,drive=d{i},serial={disk.serial}{boot}"
        if bus == "scsi":
            return self._scsi_device(f"d{i}", "scsi0", disk, i)
        if bus == "nvme":
            return f"nvme,drive=d{i},serial={disk.serial}{boot}"
        if bus == "sata":
            return f"ide-hd,drive=d{i},bus=ide.{i},serial={disk.serial}{boot}"
        raise ValueError(f"unknown disk bus {bus!r}")

    def block_sizes(self, i):
        """(logical, physical) of disk i, or None for qemu's default (512/512)."""
        size = self.block_size[i] if isinstance(self.block_size, list) else self.block_size
        return (size, size) if isinstance(size, int) else size

    def _with_block_size(self, i, device):
        """The -device values of disk i with its block sizes. An NVMe controller cannot take
        them: they are a namespace's (nvme-ns), which then holds the drive and boot index."""
        sizes = self.block_sizes(i)
        if not sizes:
            return [device]
        props = f"logical_block_size={sizes[0]},physical_block_size={sizes[1]}"
        if not device.startswith("nvme,"):
            return [f"{device},{props}"]
        opts = dict(o.split("=", 1) for o in device.split(",")[1:])
        ns = f"nvme-ns,drive={opts.pop('drive')},bus=nvme{i},nsid=1,{props}"
        if "bootindex" in opts:
            ns += f",bootindex={opts.pop('bootindex')}"
        return [",".join(["nvme", f"id=nvme{i}"] + [f"{k}={v}" for k, v in opts.items()]), ns]

    def _make_disks(self, images, count, size, serials):
        if images:
            paths = [Path(p) for p in images]
            sizes = [p.stat().st_size for p in paths]
        else:
            sizes = [parse_size(s) for s in count] if isinstance(count, (list, tuple)) \
                else [parse_size(size)] * count
            paths = [self.workdir / f"disk{i}.img" for i in range(len(sizes))]
            for p, s in zip(paths, sizes):
                with open(p, "wb") as f:
                    f.truncate(s)   # sparse: a 4 GiB disk costs nothing until written
        serials = list(serials or [f"PA-DISK{i}" for i in range(len(paths))])
        if len(serials) != len(paths):
            raise ValueError("one serial per disk")
        return [Disk(p, s, ser) for p, s, ser in zip(paths, sizes, serials)]

    @property
    def disk_images(self):
        return [d.path for d in self.disks]

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_console(self, pattern, timeout=None):
        """Wait for a regex on the serial console; return the match. Fails fast if qemu exits."""
        deadline = time.monotonic() + (timeout or self.ready_timeout)
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            text = self.console_text()
            m = rx.search(text)
            if m:
                return m
            if "Kernel panic" in text:
                raise VMError(f"{self.name}: kernel panic before {pattern!r}")
            if EMERGENCY in text:
                # systemd's emergency shell waits for a root password that nobody types
                raise VMError(f"{self.name}: emergency mode before {pattern!r}:\n"
                              + text[-3000:])
            if not self.running():
                raise VMError(f"{self.name}: qemu exited ({self.proc.returncode}) "
                              f"before {pattern!r}:\n"
                              + (self.artifacts / "qemu.log").read_text()[-2000:])
            time.sleep(0.5)
        waited = timeout or self.ready_timeout
        raise VMError(f"{self.name}: no {pattern!r} on the console after {waited}s")

    def wait_ready(self):
        """Console says READY, then SSH answers; records boot_seconds (qemu start to SSH)."""
        self.wait_console(re.escape(READY_LINE))
        # A ramdisk booted with ipa-api-url makes a fresh host key; init prints it on the
        # serial console, which the bench trusts (it is the VM's own console).
        printed = HOST_KEY_LINE.search(self.console_text())
        if printed:
            self.host_public_key = printed.group(1)
            self._pin(self.host_public_key)
        if self.ssh_address:
            host = self.ssh_address(self.console_text())
            self._pin(self.host_public_key or self.ramdisk.host_public_key, host, 22)
            self._ssh = SSH(22, client_key(), self.workdir / "known_hosts", host=host)
        remaining = max(10.0, self.ready_timeout - (time.monotonic() - self._started))
        retry = tenacity.Retrying(stop=tenacity.stop_after_delay(remaining),
                                  wait=tenacity.wait_fixed(1), reraise=True,
                                  retry=tenacity.retry_if_exception_type(GuestCommandError))
        retry(self._ssh.run, "true", timeout=30)
        self.boot_seconds = round(time.monotonic() - self._started, 1)
        print(f"vmbench: {self.name} SSH ready {self.boot_seconds}s after qemu start "
              f"(port {self.port}, artefacts {self.artifacts})")

    def stop(self, timeout=60):
        """Power the guest off (sync first) and wait for qemu to exit; kill it if it will not."""
        try:
            self._stop_qemu(timeout)
        finally:
            if self.tpm:
                self.tpm.stop()     # swtpm leaves with qemu; not if qemu never began

    def _stop_qemu(self, timeout):
        if not self.running():
            return
        try:
            if self._ssh is None:
                # nothing to ask: go straight to SIGTERM
                raise subprocess.TimeoutExpired("qemu", 0)
            try:
                self._ssh.run("sync; poweroff", check=False, timeout=20)
            except GuestCommandError:
                pass
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()   # qemu closes its images cleanly on SIGTERM
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def power_cut(self):
        """SIGKILL qemu: the machine loses power at once (what the guest had not written out is
        lost; what qemu wrote to the image files is there, as on a disk that acknowledged it)."""
        if self.running():
            self.proc.kill()
            self.proc.wait()
        if self.tpm:
            self.tpm.stop()

    def qmp(self, command, **arguments):
        """One QMP command (VM(qmp=True)); its "return", or QMPError with qemu's "error"."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(30)
            sock.connect(str(self.workdir / self.qmp_socket))
            stream = sock.makefile("rw")
            stream.readline()                                   # the greeting
            answers = []
            for cmd, args in (("qmp_capabilities", {}), (command, arguments)):
                stream.write(json.dumps({"execute": cmd, "arguments": args}) + "\n")
                stream.flush()
                while True:
                    reply = json.loads(stream.readline())
                    if "event" not in reply:                   # events are not answers
                        break
                answers.append(reply)
        if "error" in answers[-1]:
            raise QMPError(f"{command} {arguments}: {answers[-1]['error']}")
        return answers[-1].get("return")

    def close(self):
        """stop() plus removing the disk images (unless keep_disks) and the work directory."""
        try:
            self.stop()
        finally:
            if not self.keep_disks:
                shutil.rmtree(self.workdir, ignore_errors=True)

    # ---- talking to the guest ----------------------------------------------------------------
    def ssh(self, command, *, check=True, timeout=600, input=None, echo=None):
        if self._ssh is None:
            raise VMError("no SSH: this VM did not boot the ramdisk")
        return self._ssh.run(command, check=check, timeout=timeout, input=input, echo=echo)

    def put(self, local, remote):
        self._ssh.put(local, remote)

    def get(self, remote, local):
        self._ssh.get(remote, local)

    def write_text(self, remote, text):
        parent = shlex.quote(os.path.dirname(remote) or "/")
        self.ssh(f"mkdir -p {parent} && cat > {shlex.quote(remote)}", input=text)

    def provision(self, document=None, args=(), *, subcommand=None, timeout=3600, echo=None,
                  clock=False):
        """Run /usr/bin/provision in the guest; return ProvisionRun (never raises on its exit code).

        document: a dict/list (sent as JSON), a str of JSON text, a local Path, or None.
        echo: called with each line of provision's output as it arrives (see SSH.run).
        The guest's --log_file is fetched, kept under artifacts/ and returned as .log.
        """
        self._runs += 1
        n = self._runs
        argv = ["provision"] + ([subcommand] if subcommand else [])
        if document is not None:
            if isinstance(document, Path):
                text = document.read_text()
            elif isinstance(document, str):
                text = document
            else:
                text = json.dumps(document, indent=1)
            remote = f"/tmp/vmbench/input-{n}.json"
            self.write_text(remote, text)
            (self.artifacts / f"provision-{n}-input.json").write_text(text)
            argv += ["--input_data_file", remote]
        log = f"/tmp/vmbench/provision-{n}.log"
        argv += ["--log_file", log, *args]
        self.ssh("mkdir -p /tmp/vmbench")
        stamps = f"/tmp/vmbench/clock-{n}"
        if clock:
            # the guest's own clock around the process, the clock its log is stamped with
            argv = ["sh", "-c", f'date +%s.%N > {stamps}; "$@"; rc=$?; date +%s.%N >> {stamps}; '
                                'exit $rc', "sh", *argv]
        res = self.ssh(argv, check=False, timeout=timeout, echo=echo)
        logtext = self.ssh(["cat", log], check=False).stdout
        times = tuple(float(t) for t in self.ssh(["cat", stamps]).stdout.split()) if clock else None
        self.last_provision_log = logtext
        (self.artifacts / f"provision-{n}.log").write_text(
            f"$ {res.command}\n# exit {res.returncode}\n--- stdout\n{res.stdout}\n"
            f"--- stderr\n{res.stderr}\n--- log\n{logtext}")
        return ProvisionRun(res.returncode, res.stdout, res.stderr, logtext, times)

    def inventory(self):
        """`provision inventory` parsed (the machine's disks in ironic-python-agent's format)."""
        res = self.ssh(["provision", "inventory"])
        return json.loads(res.stdout)

    # ---- diagnostics ---------------------------------------------------------------------------
    def console_text(self):
        try:
            return self.console_log.read_text(errors="replace")
        except (OSError, AttributeError):
            return ""

    def console_tail(self, lines=60):
        return "\n".join(self.console_text().splitlines()[-lines:])

    def failure_report(self, lines=60):
        parts = [f"==== {self.name}: artefacts in {self.artifacts}",
                 f"==== console tail ({self.console_log if hasattr(self, 'console_log') else '-'})",
                 self.console_tail(lines)]
        if self.last_provision_log:
            parts += ["==== provision log tail",
                      "\n".join(self.last_provision_log.splitlines()[-lines:])]
        return "\n".join(parts)

    def report_failure(self):
        print(self.failure_report())
