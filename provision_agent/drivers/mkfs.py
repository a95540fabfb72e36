"""Make filesystems and swap; each tool is told to overwrite without asking."""
import re

LABEL_FLAG = {"vfat": "-n", "reiserfs": "-l"}
# The ones each tool needs to write without asking: mkfs.jfs -q answers its "continue?" with
# yes; mkfs.ntfs -Q skips zeroing the whole device (a cluster-by-cluster write of all of it)
# and -F lets it write to an array or a logical volume, which it takes for a whole disk;
# mkfs.reiserfs asks unless -f is given twice.
NO_QUESTIONS = {"jfs": ["mkfs.jfs", "-q"], "ntfs": ["mkfs.ntfs", "-Q", "-F"],
                "reiserfs": ["mkfs.reiserfs", "-f", "-f", "-q"]}


def argv(fs_type, device, label=None, options=()):
    if fs_type == "swap":
        cmd = ["mkswap", "-f"]
    elif fs_type in ("ext2", "ext3", "ext4"):
        cmd = [f"mkfs.{fs_type}", "-F", "-q"]
    elif fs_type in ("xfs", "btrfs"):
        cmd = [f"mkfs.{fs_type}", "-f"]
    elif fs_type == "vfat":
        cmd = ["mkfs.vfat"]
    elif fs_type in NO_QUESTIONS:
        cmd = list(NO_QUESTIONS[fs_type])
    else:
        raise ValueError(f"no mkfs for {fs_type!r}")
    if label:
        cmd += [LABEL_FLAG.get(fs_type, "-L"), label]
    return cmd + list(options) + [device]


def make(runner, fs_type, device, label=None, options=()):
    runner.run(argv(fs_type, device, label, options), timeout=1800)


def same_volume_id(uuid, options=()):
    """mkfs.vfat options that give a new FAT the volume ID shown as `uuid` ("EC01-A28D"), unless
    the options already pick one or `uuid` is not a FAT volume ID."""
    if "-i" in options or not uuid or not re.fullmatch(r"[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}", uuid):
        return []
    return ["-i", uuid.replace("-", "").upper()]
