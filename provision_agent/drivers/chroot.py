"""Run the image's own tools (update-initramfs, grub-install, grub-mkconfig, dracut) inside
the target root.

Those tools run as root, and so do the hooks the image ships with them: what they can reach
of the ramdisk, a hostile image can change. So the target gets:

- /dev and /sys bound in: grub-install and update-initramfs find disks, md arrays and LVM
  through device nodes and sysfs.
- a /run of its own (a tmpfs), not the ramdisk's: that holds the conductor's job directory
  (/run/provision-ironic/<node>/: input, events, log, exit code) and the agent's files. The
  udev database (/run/udev/data, tags, links: what `udevadm info` and libudev read) is copied
  in, not bound: a bind would put the ramdisk's /run tmpfs itself inside the target.
- no /proc of the ramdisk: each command runs in its own PID namespace with a fresh /proc
  (`unshare --pid --fork --mount-proc`), so /proc/1/root is the target's root and not the
  ramdisk's, no ramdisk process can be seen or signalled, and whatever the command leaves
  running dies with it (--kill-child also when the runner's timeout stops it). /proc/mdstat,
  /proc/partitions and /proc/self/mountinfo read as before.
- no tree of the ramdisk to climb back to: each command runs in a private mount namespace
  whose `/` is the target itself (enter_target.py, run by the ramdisk's python), not chrooted
  into the ramdisk's tree, so leaving the chroot (`..` from a working directory outside it)
  ends in the target again.

This is not a sandbox: root keeps its capabilities in the target (docs/security.md says what
it can still reach). The binds and the tmpfs are always undone, also when the body fails, so
the target can be unmounted afterwards.
"""

import contextlib
import logging
import os
import shutil
import stat
import sys

from provision_agent.drivers import target

LOG = logging.getLogger(__name__)

BINDS = ("dev", "sys")
UDEV_DB = "/run/udev"
UDEV_PARTS = ("data", "tags", "links")
# made in the target's /run: tools expect the usual layout (lvm's locks live in /run/lock)
RUN_DIRS = ("/run/lock", "/run/udev")
ENTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "enter_target.py")


@contextlib.contextmanager
def bound(runner, root, udev_db=UDEV_DB):
    """Bind BINDS into root and give it a /run of its own for the body; undo it afterwards."""
    done = []
    try:
        for name in BINDS:
            where = target.makedirs(root, "/" + name)
            runner.run(["mount", "--bind", f"/{name}", where])
            done.append(where)
        where = target.makedirs(root, "/run")
        runner.run(["mount", "-t", "tmpfs", "-o", "mode=755,nosuid,nodev", "tmpfs", where])
        done.append(where)
        for path in RUN_DIRS:
            target.makedirs(root, path)
        _copy_udev_db(udev_db, target.resolve(root, "/run/udev"))
        target.makedirs(root, "/proc")
        yield Chroot(runner, root)
    finally:
        for where in reversed(done):
            # lazy: a leftover process holding /dev must not make the whole step fail here
            runner.run(["umount", "--lazy", where], check=False)


def _copy_udev_db(source, dest):
    """Directories, regular files and links only (its control socket would tell tools that a
    udev answers there). udev keeps working meanwhile: an entry it removes between the listing
    and the copy (its .lock files under links/ come and go) is left out; any other error fails."""
    for part in UDEV_PARTS:
        src = os.path.join(source, part)
        if not os.path.isdir(src):
            continue
        try:
            shutil.copytree(src, os.path.join(dest, part), symlinks=True, ignore=_special,
                            copy_function=_copy, dirs_exist_ok=True)
        except shutil.Error as e:
            left = [err for err in e.args[0] if os.path.lexists(err[0])]
            if left:
                raise shutil.Error(left) from None


def _copy(src, dst):
    return shutil.copy2(src, dst)


def _special(directory, names):
    return [n for n in names if not _plain(_mode(os.path.join(directory, n)))]


def _mode(path):
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return 0   # gone since the listing: left out like a socket


def _plain(mode):
    return stat.S_ISDIR(mode) or stat.S_ISREG(mode) or stat.S_ISLNK(mode)


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

    def argv(self, argv):
        """The command line that runs argv in the target: in a PID namespace of its own, and
        a private mount namespace whose root is the target (-I: no PYTHONPATH, no user site
        of the environment decides what the helper imports)."""
        proc = target.resolve(self.root, "/proc")
        return ["unshare", "--mount", "--propagation", "private", "--pid", "--fork",
                "--kill-child", f"--mount-proc={proc}", sys.executable, "-I", ENTER,
                self.root, *argv]

    def run(self, argv, **kw):
        return self.runner.run(self.argv(argv), **kw)
