"""Nothing of a signed image may look bootable or mountable before its signature verifies.

Block-level images (raw, disk): the partition table (MBR, GPT's primary header) and the
superblocks that blkid, udev and the kernel look for (ext2/3/4, xfs, btrfs's primary, vfat,
swap, LUKS) sit in the first MiB. That MiB is held back in memory and zeros are written in its
place, so whatever an earlier system left there goes too; release() writes it last, after the
verdict, as coreos-installer does. A failure wipes what was written (wipe()). A GPT backup
header at the end of the image or of the device is no table on its own (no protective MBR), but
gdisk would rebuild one from it: wipe() clears both ends.

tar images are extracted by tar into the mounted filesystems as they stream; a failure empties
them again (empty()). qcow2 images are converted only after the verdict: nothing to hold back.
"""

import logging
import os
import stat

from provision_agent.drivers.images import formats
from provision_agent.drivers.images.blockwrite import pwrite_all
from provision_agent.drivers.images.buffers import Block
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

HOLD = 1 << 20


class Held:
    """The first min(n, HOLD) bytes of the image's first block, taken out of it: the block
    then carries zeros there to the disk."""

    def __init__(self, block, n):
        self.size = min(n, HOLD)
        self._buf = Block(HOLD)
        self._buf.view[:self.size] = block[:self.size]
        block[:self.size] = bytes(self.size)

    def release(self, target):
        """Write the held bytes at the start of target and flush them: the image becomes
        what it is now, and only now."""
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise ImageError(f"cannot open {target} to finish the image: {exc.strerror}") \
                from exc
        try:
            pwrite_all(fd, self._buf.view[:self.size], 0)
            os.fsync(fd)
        except OSError as exc:
            raise ImageError(f"writing the first MiB of {target} failed: {exc.strerror}") \
                from exc
        finally:
            os.close(fd)
        LOG.info("wrote the held-back first %s bytes of the image to %s", self.size, target)

    def close(self):
        self._buf.close()


def wipe(runner, target, written, zero_policy="auto"):
    """After a failure: nothing the image put on target may be found there. A file is emptied;
    a device is zeroed whole where that is cheap (formats.zero_device), else at both ends and
    at the end of what was written (a smaller image's own GPT backup)."""
    if not os.path.exists(target):
        return
    if stat.S_ISREG(os.stat(target).st_mode):
        os.truncate(target, 0)
        LOG.info("emptied %s after the failed image", target)
        return
    if formats.zero_device(runner, target, zero_policy):
        return
    fd = os.open(target, os.O_WRONLY | os.O_CLOEXEC)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        zeros = bytes(HOLD)
        for start in sorted({0, max(0, written - HOLD), max(0, size - HOLD)}):
            pwrite_all(fd, memoryview(zeros)[:min(HOLD, size - start)], start)
        os.fsync(fd)
    finally:
        os.close(fd)
    LOG.info("zeroed the first and last MiB of %s and the end of the %s bytes written",
             target, written)


def empty(top):
    """Remove everything under top, on its filesystem and those mounted below it: a failed
    tar image leaves them as mkfs made them. Links are removed, never followed; mount points
    and a filesystem's lost+found stay."""
    for here, dirs, files in os.walk(top, topdown=False):
        for name in files:
            os.unlink(os.path.join(here, name))
        for name in dirs:
            path = os.path.join(here, name)
            if os.path.islink(path):
                os.unlink(path)
            elif not (os.path.ismount(path) or (name == "lost+found" and os.path.ismount(here))):
                os.rmdir(path)
    LOG.info("emptied %s after the failed tar image", top)
