"""What a plug-in's run(step, context) gets (provision_agent.api re-exports it; docs/extending.md
is the contract): the runner and events the built-in steps use, the run's options, the
resolved layout of the plan, and `target`, the new system's files and commands.

`target` does what provision does itself when it writes into the installed system: every path
is the installed system's (absolute, as in the image) and is resolved inside the target root
the way a chroot would resolve it (drivers/target.py): an absolute link in the image starts
again at the target root and '..' stops there, so a link in the image that points at
/etc/shadow reaches the target's /etc/shadow, never the ramdisk's; the final open never follows
a link. Commands run inside the target in the isolated root provision uses for grub and the
initramfs (drivers/chroot.py): own mount and PID namespaces, the target as `/`.
"""

import dataclasses
import os

from provision_agent.drivers import chroot, mount, target
from provision_agent.errors import EXIT_COMMAND_FAILED, ProvisionError

# what read_bytes() reads at most unless told: a configuration file, not an image
READ_LIMIT = 1 << 20


class TargetError(ProvisionError):
    """The target cannot be used as asked: not mounted in this phase, a file too big to read."""

    exit_code = EXIT_COMMAND_FAILED


class Target:
    def __init__(self, runner, root, mounts):
        self.runner = runner
        self.root = root
        self._mounts = mounts

    def mounted(self):
        """True when the new system's root filesystem is mounted (phases after_image,
        before_boot, after_boot)."""
        top = mount.target_path(self.root, "/").rstrip("/")
        return top in [p.rstrip("/") for p in self._mounts.stack]

    def _need(self, what):
        if not self.mounted():
            raise TargetError(f"{what}: the new system is not mounted in this phase (only in "
                              f"after_image, before_boot and after_boot)")

    def path(self, path):
        """The ramdisk's path of the target's `path`, resolved inside the target root."""
        self._need(path)
        return target.resolve(self.root, path)

    def exists(self, path):
        return os.path.lexists(self.path(path))

    def read_bytes(self, path, limit=READ_LIMIT):
        """The file's bytes (None when there is none); TargetError above `limit` bytes."""
        try:
            fd = os.open(self.path(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, "rb") as f:
            if not _regular(f):     # a FIFO or a device: never read (or waited on)
                raise TargetError(f"{path} in the target is not a regular file")
            data = f.read(limit + 1)
        if len(data) > limit:
            raise TargetError(f"{path} in the target is larger than {limit} bytes")
        return data

    def read_text(self, path, limit=READ_LIMIT):
        data = self.read_bytes(path, limit)
        return None if data is None else data.decode()

    def write_bytes(self, path, data, mode=0o644):
        """Write (replace) the target's file at `path`, parents made; returns the host path."""
        self._need(path)
        return target.write_bytes(self.root, path, data, mode)

    def write_text(self, path, text, mode=0o644):
        return self.write_bytes(path, text.encode(), mode)

    def makedirs(self, path):
        self._need(path)
        return target.makedirs(self.root, path)

    def run(self, argv, **kw):
        """argv run inside the target (runner.run's keywords and Result; CommandError on
        failure), with /dev and /sys bound in and a /run of its own, undone afterwards."""
        self._need(argv[0] if argv else "a command")
        with chroot.bound(self.runner, self.root) as inside:
            return inside.run(argv, **kw)


def _regular(f):
    import stat
    return stat.S_ISREG(os.fstat(f.fileno()).st_mode)


@dataclasses.dataclass
class Context:
    """run(step, context)'s second argument (API 1.0)."""
    runner: object          # .run(argv, check=, timeout=, input=, ok_codes=) -> Result
    events: object          # .emit(event, **fields), .progress(done, total): events
    target_root: str        # where the new system is mounted (prefer `target`)
    options: dict           # the run's options: oslo.config values by name
    layout: object          # the resolved layout (plan/resolve.py Resolved) of this plan
    target: Target          # the new system's files and commands
    plugin: str             # the plug-in's name, as errors show it
