"""What each image format needs around the byte stream: growing a filesystem image to its
volume, re-reading a written partition table, extracting a tar, converting a qcow2, and
zeroing a target so the writer may skip zero blocks. External tools go through the Runner.
"""

import errno
import logging
import os
import stat
import tempfile

from provision_agent.drivers import blockinfo
from provision_agent.drivers.images import qcow2
from provision_agent.errors import CommandError, ImageError

LOG = logging.getLogger(__name__)

FORMATS = ("raw", "disk", "tar", "qcow2")
TAR_ARGS = ("--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls", "-xpf", "-")


def detect_fs(runner, device):
    result = runner.run(["blkid", "-p", "-o", "value", "-s", "TYPE", device], check=False)
    return result.stdout.strip() or None


def grow_fs(runner, device, fs_type=None):
    """Grow the filesystem on device to fill it; returns the fs type it grew (or None)."""
    fs_type = fs_type or detect_fs(runner, device)
    if fs_type in ("ext2", "ext3", "ext4"):
        # resize2fs insists on a freshly checked filesystem; 1 means e2fsck fixed something.
        runner.run(["e2fsck", "-f", "-y", device], ok_codes=(0, 1))
        runner.run(["resize2fs", device])
    elif fs_type in ("xfs", "btrfs"):
        # Both grow only while mounted.
        with tempfile.TemporaryDirectory(prefix="provision-grow-") as where:
            runner.run(["mount", "-t", fs_type, device, where])
            try:
                if fs_type == "xfs":
                    runner.run(["xfs_growfs", where])
                else:
                    runner.run(["btrfs", "filesystem", "resize", "max", where])
            finally:
                runner.run(["umount", where])
    elif fs_type is None:
        raise ImageError(f"the raw image written to {device} holds no filesystem blkid "
                         f"recognizes; is it a whole-disk image (format 'disk')?")
    else:
        LOG.info("%s: %s is not grown (no online/offline grow for it)", device, fs_type)
    return fs_type


def move_gpt_backup_to_end(runner, disk):
    """A GPT image made for a smaller disk leaves its backup header mid-disk, where nothing
    looks for it and the space after it is unusable; sgdisk -e rewrites it at the real end."""
    runner.run(["sgdisk", "-e", disk])


def reread_partitions(runner, disk):
    """Make the kernel and udev see the partition table a whole-disk image brought."""
    try:
        runner.run(["blockdev", "--rereadpt", disk])
    except CommandError as exc:
        LOG.info("blockdev --rereadpt %s failed (%s); trying partprobe", disk, exc.returncode)
        runner.run(["partprobe", disk])
    runner.run(["udevadm", "settle"], check=False)


ZERO_POLICIES = ("auto", "always", "never")


def zero_device(runner, device, policy="auto", sysfs="/sys/class/block"):
    """Zero device only where that is cheap, so the writer may then seek over zero blocks.

    fallocate --punch-hole on a block device asks the kernel to zero without its fallback of
    writing zero pages (BLKDEV_ZERO_NOFALLBACK): the device unmaps/WRITE ZEROES the range or the
    call fails. A rotating disk may implement WRITE SAME by writing every block, which would cost
    a full pass before the real one, so `auto` leaves rotational devices alone; `always` only
    needs write-zeroes support; `never` disables it. Returns whether the device now reads zeros;
    the caller must not claim a zeroed target otherwise.
    """
    if policy == "never":
        return False
    if (blockinfo.queue_value(device, "write_zeroes_max_bytes", sysfs) or "0") == "0":
        LOG.info("%s cannot zero without writing (no write-zeroes support): every block of the "
                 "image will be written", device)
        return False
    if policy == "auto" and blockinfo.queue_value(device, "rotational", sysfs) == "1":
        LOG.info("%s is rotational: not pre-zeroing it (WRITE SAME may write every block); "
                 "--image_zero_target=always overrides", device)
        return False
    size = runner.run(["blockdev", "--getsize64", device]).stdout.strip()
    try:
        runner.run(["fallocate", "--punch-hole", "--offset", "0", "--length", size, device],
                   timeout=3600)
    except CommandError as exc:
        LOG.info("cannot zero %s cheaply: every block of the image will be written (%s)",
                 device, exc)
        return False
    LOG.info("zeroed %s (%s bytes) by unmapping; zero blocks of the image will be skipped",
             device, size)
    return True


def extract_tar(runner, reader, directory, chunk):
    """Stream a tar into directory with owners, modes, xattrs, ACLs and hard links kept."""
    if not os.path.isdir(directory):
        raise ImageError(f"tar image target {directory} is not a mounted directory")

    def feed(write):
        while True:
            data = reader.read(chunk)
            if not data:
                return
            try:
                write(data)
            except BrokenPipeError:
                break
        # tar stops reading at its end-of-archive blocks; what follows must be padding only
        # (and is still read so that the checksum covers the whole stream).
        while data:
            if data.count(0) != len(data):
                raise ImageError(f"tar image: data follows the end of the archive in "
                                 f"{directory}'s image (corrupt or not one tar archive)")
            data = reader.read(chunk)

    runner.run_feeding(["tar", *TAR_ARGS, "-C", directory], feed, timeout=None)


def spool(reader, chunk, tmp_dir=None):
    """qemu-img needs a seekable qcow2, so the (decompressed) stream of a qcow2 image goes to
    a temporary file first (the caller verifies it, then convert_qcow2 writes the target).
    That costs the image's size in tmp_dir (RAM in a ramdisk); raw images avoid it."""
    tmp = tempfile.NamedTemporaryFile(prefix="provision-image-", suffix=".qcow2", dir=tmp_dir)
    written = 0
    try:
        while True:
            data = reader.read(chunk)
            if not data:
                break
            tmp.write(data)
            written += len(data)
        tmp.flush()
    except OSError as exc:
        tmp.close()
        if exc.errno != errno.ENOSPC:
            raise
        where = os.path.dirname(tmp.name)
        raise ImageError(
            f"a qcow2 image is converted from a temporary copy, and {where} (RAM in the "
            f"ramdisk) filled up after {written >> 20} MiB of it: give the machine more "
            f"memory, or provide the image as raw (streamed, no copy; Ironic converts images "
            f"on the conductor with [DEFAULT]force_raw_images)") from None
    except BaseException:
        tmp.close()
        raise
    return tmp


def convert_qcow2(runner, path, target):
    """Convert the spooled qcow2 at path onto target, once qcow2.info() has found it
    self-contained; returns what qemu-img info said of it."""
    found = qcow2.info(runner, path)
    block = os.path.exists(target) and stat.S_ISBLK(os.stat(target).st_mode)
    # A block device exists (-n: do not create it) and takes O_DIRECT (-t none); a file is
    # created by qemu-img at the right size.
    extra = ["-n", "-t", "none"] if block else []
    runner.run(["qemu-img", "convert", *extra, "-f", "qcow2", "-O", "raw",
                qcow2.source_name(path), target], timeout=None)
    return found
