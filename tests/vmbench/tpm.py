"""A TPM 2.0 for a VM: Debian's swtpm, its state in a directory of its own. The state is the
chip: a VM started later with the same directory (the installed system booting from the disks
provisioned in the ramdisk VM) meets the same TPM; a new directory is another machine's TPM.
"""

import subprocess
import time
from pathlib import Path


class SoftTPM:
    def __init__(self, state_dir):
        self.state_dir = Path(state_dir)
        self.proc = None
        self.socket = None

    def start(self, workdir):
        """Start swtpm for one qemu run; its qemu arguments. --terminate: swtpm exits when the
        qemu it serves closes the connection."""
        self.stop()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.socket = Path(workdir) / "tpm.sock"
        self.socket.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            ["swtpm", "socket", "--tpm2", "--terminate", "--tpmstate", f"dir={self.state_dir}",
             "--ctrl", f"type=unixio,path={self.socket}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while not self.socket.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"swtpm did not start: {self.proc.stderr.read()!r}"
                                   if self.proc.poll() is not None else "swtpm: no socket")
            time.sleep(0.05)
        return ["-chardev", f"socket,id=chrtpm,path={self.socket}",
                "-tpmdev", "emulator,id=tpm0,chardev=chrtpm",
                "-device", "tpm-tis,tpmdev=tpm0"]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
