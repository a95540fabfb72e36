"""Finding (or building) the ramdisk the VM boots, and the SSH client key for it."""

import fcntl
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def cache_dir():
    """The same cache scripts/lib.sh uses: outside the clone, shared by every checkout."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(os.environ.get("PROVISION_AGENT_CACHE") or os.path.join(base, "provision-agent"))


@dataclass(frozen=True)
class Ramdisk:
    directory: Path

    @property
    def kernel(self):
        return self.directory / "vmlinuz"

    @property
    def initramfs(self):
        return self.directory / "initramfs"

    @property
    def host_public_key(self):
        """The sshd host key baked in at build time (one line, "ssh-ed25519 AAAA... comment")."""
        return (self.directory / "ssh_host_ed25519_key.pub").read_text().strip()

    @property
    def manifest(self):
        return json.loads((self.directory / "manifest.json").read_text())

    def base_paths(self, timeout=300):
        """The paths the initramfs's base layer holds (its first cpio archive: tools, modules,
        udev rules), read from the artefact without a boot and without holding it in memory."""
        unpack = subprocess.Popen(["zstdcat", str(self.initramfs)], stdout=subprocess.PIPE)
        try:
            listing = subprocess.run(["cpio", "-t", "--quiet"], stdin=unpack.stdout,
                                     capture_output=True, text=True, check=True,
                                     timeout=timeout).stdout.split()
        finally:
            unpack.stdout.close()
        # cpio stops at the base layer's trailer; zstdcat, still writing the project layer,
        # then gets SIGPIPE
        if unpack.wait(timeout) not in (0, -13):
            raise RamdiskBuildError(f"zstdcat {self.initramfs} exited {unpack.returncode}")
        return set(listing)


class RamdiskBuildError(RuntimeError):
    pass


def ensure_ramdisk(rebuild=False, extra=(), out=None):
    """Build the ramdisk or reuse the cached layers; return it.

    extra: more build.sh arguments (--extra-wheel, --extra-file ...); out: its own directory
    for such a build, so the shared `current` one stays the plain ramdisk.

    PROVISION_RAMDISK_DIR points at a prebuilt one instead (nothing is built then; the Ironic
    lab needs it built with --authorized-key of client_key()'s .pub, build_key_args()).
    The build is cheap when only the project changed (seconds) and needs root.
    """
    prebuilt = os.environ.get("PROVISION_RAMDISK_DIR")
    if prebuilt and not extra:
        return Ramdisk(Path(prebuilt))
    argv = (["bash", str(REPO_ROOT / "ramdisk" / "build.sh"), *build_key_args(), *extra]
            + (["--rebuild"] if rebuild else []) + (["--out", str(out)] if out else []))
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RamdiskBuildError(
            f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    summary = [ln for ln in proc.stderr.splitlines() if ln.startswith("ramdisk:")]
    for line in summary:
        print(line)
    return Ramdisk(Path(proc.stdout.strip().splitlines()[-1]))


def build_key_args():
    """build.sh's arguments that bake the bench's key in: booted by Ironic (the lab) the
    ramdisk ignores sshkey= on its command line, where a node's instance_info can put words
    (issue 52 item 6), so the conductor's key has to be in the build, as for an operator."""
    return ["--authorized-key", str(client_key().with_suffix(".pub"))]


def client_key():
    """Path of the bench's SSH private key (made once, kept in the cache); .pub next to it."""
    path = cache_dir() / "vmbench" / "id_ed25519"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    # test workers side by side (xdist) must not both make it: ssh-keygen asks before overwriting
    with open(path.parent / ".key.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                            "provision-vmbench", "-f", str(path)], check=True)
    return path
