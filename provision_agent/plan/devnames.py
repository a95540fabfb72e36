"""Kernel device names the plan can know before anything exists."""

import re

MULTIPATH_LINK = "/dev/disk/by-id/dm-uuid-mpath-"
MULTIPATH_PART = re.compile(r"/dev/disk/by-id/dm-uuid-part([0-9]+)-mpath-")


def multipath_link(wwid):
    return MULTIPATH_LINK + wwid


def partition_device(disk, number):
    """/dev/sda + 1 -> /dev/sda1; /dev/nvme0n1 + 1 -> /dev/nvme0n1p1 (names ending in a digit);
    a multipath map's by-id link -> the link udev makes for kpartx's map of that partition."""
    if disk.startswith(MULTIPATH_LINK):
        return f"/dev/disk/by-id/dm-uuid-part{number}-mpath-{disk[len(MULTIPATH_LINK):]}"
    sep = "p" if disk[-1].isdigit() else ""
    return f"{disk}{sep}{number}"


def md_device(name):
    return f"/dev/md/{name}"


def bcache_device(name):
    """A bcache device by its label: the kernel numbers /dev/bcacheN as it registers them;
    bcache-tools' udev rule (and the bcache step, where udev has not) links it so."""
    return f"/dev/bcache/by-label/{name}"


def mapper_device(name):
    """An open dm-crypt volume."""
    return f"/dev/mapper/{name}"


def lv_device(vg, lv):
    return f"/dev/{vg}/{lv}"


def partition_number(device):
    """/dev/sda12 -> 12, /dev/nvme0n1p3 -> 3, /dev/mapper/mpatha-part2 -> 2."""
    m = MULTIPATH_PART.match(device)
    if m:
        return int(m.group(1))
    digits = ""
    for ch in reversed(device):
        if not ch.isdigit():
            break
        digits = ch + digits
    return int(digits)
