"""Nothing of a verified image (a signature, a checksum) may look bootable or mountable before
it verifies.

Block-level images (raw, disk): the partition table (MBR, GPT's primary header) and the
superblocks that blkid, udev and the kernel look for (ext2/3/4, xfs, btrfs's primary, vfat,
swap, LUKS) sit in the first MiB. That MiB is held back in memory and zeros are written in its
place, so whatever an earlier system left there goes too; release() writes it last, after the
verdict, as coreos-installer does. A failure wipes what was written (wipe()): both ends of the
target (a GPT backup header there is no table on its own, no protective MBR, but gdisk would
rebuild one from it), and what the held table names beyond the first MiB: each partition's
first and last MiB (an ext4 at 1 MiB is whole one byte past the held MiB) and the image's own
GPT backup header wherever its primary says it is (held_table.py).

tar images are extracted by tar into the mounted filesystems as they stream; a failure empties
them again (empty()). qcow2 images are converted only after the verdict: nothing to hold back.
"""

import logging
import os
import stat

from provision_agent.drivers.images import formats, held_table
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

    @property
    def view(self):
        """The held bytes (the first size of them are the image's)."""
        return self._buf.view

    def close(self):
        self._buf.close()


class Taken:
    """What of an image reached its target so far: its bytes, and its held-back start (Held),
    whose table tells a wipe where the rest went; known also when the write fails midway."""

    def __init__(self):
        self.written = 0
        self.held = None


def take_back(runner, fmt, target, mount_dir, taken, zero_policy):
    """A verified image failed (its signature, its checksum, or anything before them held):
    take back what reached the target, so that nothing unverified is left to boot or mount."""
    try:
        if fmt == "tar":
            empty(mount_dir)
        elif fmt in ("raw", "disk"):
            wipe(runner, target, taken.written, zero_policy, taken.held)
    except Exception:   # the image's own failure is the one to report
        LOG.exception("could not wipe %s after the failed image", target or mount_dir)


def wipe(runner, target, written, zero_policy="auto", held=None):
    """After a failure: nothing the image put on target may be found there. A file is emptied;
    a device is zeroed whole where that is cheap (formats.zero_device), else at both ends, at
    the end of what was written, and wherever the table in held (the image's held-back start)
    puts a partition's start or end or a GPT header (held_table.py)."""
    if not os.path.exists(target):
        return
    if stat.S_ISREG(os.stat(target).st_mode):
        os.truncate(target, 0)
        LOG.info("emptied %s after the failed image", target)
        return
    if formats.zero_device(runner, target, zero_policy):
        return
    fd = os.open(target, os.O_RDWR | os.O_CLOEXEC)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        ends = [(0, HOLD), (written - HOLD, HOLD), (size - HOLD, HOLD)]
        # all of the table is read before anything is zeroed: an EBR chain runs over the disk
        named = held_table.ranges(_image(held, fd), size, HOLD) if held else []
        zeros = bytes(HOLD)
        for start, length in held_table.merge(ends + named, size):
            for at in range(start, start + length, HOLD):
                pwrite_all(fd, memoryview(zeros)[:min(HOLD, start + length - at)], at)
        os.fsync(fd)
    finally:
        os.close(fd)
    LOG.info("zeroed the first and last MiB of %s, the end of the %s bytes written and %s "
             "places the image's partition table names", target, written, len(named))


def _image(held, fd):
    """read(offset, n) of the failed image: the held-back start from memory (the target has
    zeros there), the rest from the target."""
    def read(offset, n):
        head = bytes(held.view[offset:min(offset + n, held.size)]) if offset < held.size else b""
        rest = n - len(head)
        return head + (os.pread(fd, rest, offset + len(head)) if rest > 0 else b"")
    return read


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
