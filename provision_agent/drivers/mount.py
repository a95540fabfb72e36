"""Mount the target's filesystems under one root and always unmount them again."""

import logging
import os
import tempfile

from provision_agent.drivers import blockinfo, target
from provision_agent.errors import CommandError

LOG = logging.getLogger(__name__)


def target_path(root, mount_point):
    """Where mount_point of the target is on this machine: inside root, links resolved there."""
    return target.resolve(root, mount_point)


class Mounts:
    """The stack of what we mounted, so unmounting is in reverse order and also on failure."""

    def __init__(self, runner, root):
        self.runner = runner
        self.root = root
        self.stack = []
        self.where = {}        # mount point -> path mounted on (resolved once, when mounted)

    def mount(self, device, mount_point, fs_type=None, options=None, adopt=False):
        """Mount device at mount_point under the target root. adopt (for a filesystem made
        empty by this run): what a parent's image already put at that path is copied into it
        first, since the mount would hide it (a root image's /boot when /boot is its own md)."""
        where = target.makedirs(self.root, mount_point)
        if adopt and mount_point.strip("/") and os.listdir(where):
            self._adopt(device, fs_type, where)
        argv = ["mount"]
        if fs_type and fs_type != "auto":
            argv += ["-t", fs_type]
        # mount options are for the installed system (fstab); ours need not honour noexec etc.
        self.runner.run(argv + [device, where])
        self.stack.append(where)
        self.where[mount_point] = where
        return where

    def _adopt(self, device, fs_type, where):
        LOG.info("%s already holds %d entries (from an image); copying them into %s before it "
                 "is mounted over them", where, len(os.listdir(where)), device)
        copy_into(self.runner, where, device, fs_type)

    def umount(self, mount_point):
        where = self.where.pop(mount_point, None)
        if where in self.stack:
            self.runner.run(["umount", where])
            self.stack.remove(where)

    def umount_all(self, mountinfo="/proc/self/mountinfo"):
        """Best effort, deepest first; returns the paths that could not be unmounted. An
        umount that times out (after a fault the runner bounds it: its filesystem's last
        writes wait on a disk that stopped answering) does not stop the others: the path is
        detached (umount --lazy, which waits for no write) and counts as failed only if it is
        still mounted."""
        failed = []
        while self.stack:
            where = self.stack.pop()
            try:
                res = self.runner.run(["umount", where], check=False)
            except CommandError as exc:
                LOG.error("could not unmount %s: %s; detaching it (umount --lazy)", where, exc)
                if self._detach(where, mountinfo):
                    failed.append(where)
                continue
            if res.returncode != 0:
                LOG.error("could not unmount %s: %s", where, res.stderr.strip())
                failed.append(where)
        return failed

    def _detach(self, where, mountinfo):
        """umount --lazy where; True when it is still mounted after it."""
        try:
            self.runner.run(["umount", "--lazy", where], check=False)
        except CommandError as exc:
            LOG.error("umount --lazy %s: %s", where, exc)
        return any(point == where for _, point in blockinfo.mounts(mountinfo))


def copy_into(runner, source_dir, device, fs_type):
    """Copy source_dir's contents onto the filesystem on device, mounted for the copy only."""
    staging = tempfile.mkdtemp(prefix="provision-copy-")
    argv = ["mount"] + (["-t", fs_type] if fs_type and fs_type != "auto" else [])
    runner.run(argv + [device, staging])
    try:
        # vfat keeps neither owners nor symlinks: copy what the links point to
        copy = ["cp", "-rL"] if fs_type == "vfat" else ["cp", "-a", "--one-file-system"]
        runner.run(copy + [f"{source_dir}/.", staging], timeout=3600)
    finally:
        runner.run(["umount", staging])
        os.rmdir(staging)


def check_target_root(runner, root, planned_disks, mountinfo="/proc/self/mountinfo"):
    """target.check_root against this machine's mounts: before release_stale may unmount."""
    def ours(source):
        disks = set(blockinfo.disks_under(runner, source)) if source.startswith("/dev/") else set()
        return bool(disks) and disks <= set(planned_disks)
    # The last mount at a point is the one seen there.
    at = {where: source for source, where in blockinfo.mounts(mountinfo)}
    return target.check_root(root, at, ours)


def release_stale(runner, root, mountinfo="/proc/self/mountinfo"):
    """Unmount what an interrupted earlier run left mounted under root (only under root)."""
    root = os.path.realpath(root).rstrip("/")
    stale = [where for _, where in blockinfo.mounts(mountinfo)
             if where == root or where.startswith(root + "/")]
    for where in sorted(stale, key=lambda p: p.count("/"), reverse=True):
        LOG.warning("unmounting %s, left mounted by an earlier run", where)
        runner.run(["umount", where], check=False)
        if os.path.ismount(where):
            runner.run(["umount", "--lazy", where])
    return stale
