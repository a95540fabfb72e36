"""An iSCSI target on the host for the VMs (they reach it as 10.0.2.2): Debian's tgt, a
userspace target (tgtd, configured by tgtadm), serving file-backed LUNs on a free loopback
port, with CHAP. The host needs no kernel module; scripts/host-packages.sh installs tgt.

    with IscsiTarget(workdir, luns={1: 8 << 30}, chap=("node1", "secret")) as tgt:
        tgt.guest_portal          # "10.0.2.2:PORT", what a layout's iscsi.portal names
        tgt.iqn, tgt.lun_path(1)  # the target's name; the file behind LUN 1 (read it back)
    # leaving the block stops tgtd; the LUN files stay in workdir

tgtd runs in the foreground with its own control port (-C), so it never meets a tgtd the host
may run, and is stopped by its PID.
"""

import re
import socket
import subprocess
import time
from pathlib import Path

from tests.vmbench import procs
from tests.vmbench.httpserve import GUEST_HOST_ADDRESS

TGTD = "/usr/sbin/tgtd"
TGTADM = "/usr/sbin/tgtadm"
IQN = "iqn.2026-11.example.provision:vmbench"


def _free_port(address):
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


class IscsiTarget:
    def __init__(self, workdir, luns, chap=None, chap_mutual=None, iqn=IQN,
                 address="127.0.0.1", port=0):
        """luns: {LUN number: size in bytes} (sparse files in workdir). chap: (user, password)
        the initiator must log in with; chap_mutual: (user, password) the target answers with.
        port: 0 for a free one."""
        self.workdir = Path(workdir)
        self.luns = dict(luns)
        self.chap, self.chap_mutual = chap, chap_mutual
        self.iqn, self.address, self.fixed_port = iqn, address, port
        self.port = None
        self.control = None
        self._proc = None
        self._log = None

    @property
    def portal(self):
        return f"{self.address}:{self.port}"

    @property
    def guest_portal(self):
        return f"{GUEST_HOST_ADDRESS}:{self.port}"

    def lun_path(self, lun):
        return self.workdir / f"lun{lun}.img"

    def adm(self, *args, check=True):
        return subprocess.run([TGTADM, "-C", str(self.control), "--lld", "iscsi", *args],
                              capture_output=True, text=True, timeout=30, check=check)

    def __enter__(self):
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = self.fixed_port or _free_port(self.address)
        self.control = self.port % 10000 + 20000       # an abstract socket's number, not TCP
        self._log = open(self.workdir / "tgtd.log", "ab")
        self._proc = subprocess.Popen(
            [TGTD, "-f", "-C", str(self.control), "--iscsi", f"portal={self.portal}"],
            stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_listening()
            self._configure()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_listening(self, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"tgtd exited ({self._proc.returncode}); see "
                                   f"{self.workdir / 'tgtd.log'}")
            try:
                socket.create_connection((self.address, self.port), timeout=1).close()
                if self.adm("--op", "show", "--mode", "sys", check=False).returncode == 0:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"tgtd did not listen on {self.portal} within {timeout}s")

    def _configure(self):
        self.adm("--op", "new", "--mode", "target", "--tid", "1", "-T", self.iqn)
        for lun, size in sorted(self.luns.items()):
            path = self.lun_path(lun)
            if not path.exists():
                with open(path, "wb") as f:
                    f.truncate(size)
            self.adm("--op", "new", "--mode", "logicalunit", "--tid", "1", "--lun", str(lun),
                     "-b", str(path))
        self.adm("--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL")
        for pair, outgoing in ((self.chap, False), (self.chap_mutual, True)):
            if pair:
                user, password = pair
                self.adm("--op", "new", "--mode", "account", "--user", user,
                         "--password", password)
                self.adm("--op", "bind", "--mode", "account", "--tid", "1", "--user", user,
                         *(["--outgoing"] if outgoing else []))

    def show(self):
        """tgtadm's description of the target: {lun: size in bytes}, the accounts bound and
        the initiators connected (the I_T nexus lines)."""
        text = self.adm("--op", "show", "--mode", "target").stdout
        luns = {int(m.group(1)): int(m.group(2)) * 1000 * 1000 for m in re.finditer(
            r"LUN: (\d+)\n(?:\s+.*\n)*?\s+Size: (\d+) MB", text)}
        accounts = re.findall(r"^\s+Account information:\n((?:\s{8}.*\n)*)", text, re.M)
        initiators = re.findall(r"Initiator: (\S+)", text)
        return {"text": text, "luns": luns,
                "accounts": accounts[0].split() if accounts else [], "initiators": initiators}

    def __exit__(self, *exc):
        if self._proc is not None and self._proc.poll() is None:
            # tgtd leaves when asked once it has no target; SIGTERM alone waits out
            # procs.stop's 20 s
            self.adm("--op", "delete", "--mode", "target", "--tid", "1", "--force", check=False)
            self.adm("--op", "delete", "--mode", "system", check=False)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                pass
        procs.stop(self._proc)
        if self._log:
            self._log.close()
        return False
