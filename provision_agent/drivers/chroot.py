"""Run commands inside the target root with the host's /dev /proc /sys /run bound in.

grub-install, update-initramfs and friends need real device nodes and sysfs to find disks; the
binds are always undone, also when the body fails, so the target can be unmounted afterwards.
"""

import contextlib
import logging
import os

from provision_agent.drivers import target

LOG = logging.getLogger(__name__)

BINDS = ("dev", "proc", "sys", "run")


@contextlib.contextmanager
def bound(runner, root):
    """Bind-mount BINDS into root for the body; unmount them in reverse order afterwards."""
    done = []
    try:
        for name in BINDS:
            where = target.makedirs(root, "/" + name)
            runner.run(["mount", "--bind", f"/{name}", where])
            done.append(where)
        yield Chroot(runner, root)
    finally:
        for where in reversed(done):
            # lazy: a leftover process holding /dev must not make the whole step fail here
            runner.run(["umount", "--lazy", where], check=False)


class Chroot:
    def __init__(self, runner, root):
        self.runner = runner
        self.root = root

    def has(self, program):
        """True if the target ships program in a usual sbin/bin directory."""
        for d in ("usr/sbin", "usr/bin", "sbin", "bin"):
            if os.access(os.path.join(self.root, d, program), os.X_OK):
                return True
        return False

    def run(self, argv, **kw):
        return self.runner.run(["chroot", self.root, *argv], **kw)
