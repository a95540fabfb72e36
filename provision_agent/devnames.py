"""Kernel device names the plan can know before anything exists."""


def partition_device(disk, number):
    """/dev/sda + 1 -> /dev/sda1; /dev/nvme0n1 + 1 -> /dev/nvme0n1p1 (names ending in a digit)."""
    sep = "p" if disk[-1].isdigit() else ""
    return f"{disk}{sep}{number}"


def md_device(name):
    return f"/dev/md/{name}"


def lv_device(vg, lv):
    return f"/dev/{vg}/{lv}"


def partition_number(device):
    """/dev/sda12 -> 12, /dev/nvme0n1p3 -> 3."""
    digits = ""
    for ch in reversed(device):
        if not ch.isdigit():
            break
        digits = ch + digits
    return int(digits)
