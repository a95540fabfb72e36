"""A minimal grub.cfg for an image that ships a kernel but no grub-mkconfig.

The ramdisk's grub-mkconfig cannot stand in: it reads the running system's /boot and
/etc/default/grub, not the target's. What grub needs is small: find the /boot filesystem by
UUID, then one menu entry per kernel found in the target's /boot, newest first.
"""

import logging
import os
import re

from provision_agent.drivers import target
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

KERNEL_PREFIX = "vmlinuz-"
INITRD_NAMES = ("initrd.img-{}", "initramfs-{}.img", "initrd-{}")
GRUB_FS_MODULE = {"ext2": "ext2", "ext3": "ext2", "ext4": "ext2", "xfs": "xfs",
                  "btrfs": "btrfs", "vfat": "fat", "jfs": "jfs", "reiserfs": "reiserfs"}


def _version_key(version):
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", version)]


def kernels(boot_dir):
    """[(version, initrd file name or None)] found in boot_dir, newest first."""
    found = []
    for name in os.listdir(boot_dir):
        if not name.startswith(KERNEL_PREFIX) or name.endswith((".sig", ".old")):
            continue
        version = name[len(KERNEL_PREFIX):]
        initrd = next((n.format(version) for n in INITRD_NAMES
                       if os.path.exists(os.path.join(boot_dir, n.format(version)))), None)
        found.append((version, initrd))
    return sorted(found, key=lambda k: _version_key(k[0]), reverse=True)


def render(title, found, boot_uuid, boot_fs_type, path_prefix, cmdline):
    """grub.cfg text. path_prefix is "/boot" when /boot is a directory of the root filesystem,
    "" when it is a filesystem of its own (grub sees paths relative to that filesystem)."""
    lines = ["# Written by provision: the image has no grub-mkconfig to do it.",
             "set default=0", "set timeout=2",
             "insmod part_gpt", "insmod part_msdos", "insmod lvm", "insmod mdraid1x"]
    if boot_fs_type in GRUB_FS_MODULE:
        lines.append(f"insmod {GRUB_FS_MODULE[boot_fs_type]}")
    for version, initrd in found:
        lines += [f"menuentry '{title}, Linux {version}' {{",
                  f"    search --no-floppy --fs-uuid --set=root {boot_uuid}",
                  f"    linux {path_prefix}/{KERNEL_PREFIX}{version} {cmdline}".rstrip()]
        if initrd:
            lines.append(f"    initrd {path_prefix}/{initrd}")
        lines.append("}")
    return "\n".join(lines) + "\n"


def _title(root):
    try:
        text = target.read_text(root, "/etc/os-release")
    except OSError:
        return "Linux"
    for line in text.splitlines():
        if line.startswith("PRETTY_NAME="):
            # Into a single-quoted grub menuentry title: nothing that could end it.
            return "".join(c for c in line.split("=", 1)[1].strip().strip('"')
                           if c.isprintable() and c not in "'\\")[:80] or "Linux"
    return "Linux"


def write(runner, root, cmdline):
    boot_dir = target.resolve(root, "/boot")
    found = kernels(boot_dir)
    if not found:
        raise ImageError(f"the image has no grub-mkconfig and no {KERNEL_PREFIX}* kernel in "
                         "/boot: nothing to boot")
    res = runner.run(["findmnt", "-n", "-o", "UUID,FSTYPE,TARGET", "--target", boot_dir])
    uuid, fs_type, where = res.stdout.split()[:3]
    prefix = "" if os.path.realpath(where) == os.path.realpath(boot_dir) else "/boot"
    text = render(_title(root), found, uuid, fs_type, prefix, cmdline)
    path = target.write_text(root, "/boot/grub/grub.cfg", text)
    LOG.info("bootloader: wrote a minimal %s for %s", path,
             ", ".join(v for v, _ in found))
    return path
