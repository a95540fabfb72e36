"""Regenerate the target's initramfs with the tool the image ships (detected, not assumed)."""

import logging
import os

from provision_agent.drivers import initramfs_cpio
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)


def regenerate(chroot):
    if chroot.has("update-initramfs"):
        LOG.info("initramfs: update-initramfs from the image")
        return chroot.run(["update-initramfs", "-u", "-k", "all"])
    if chroot.has("dracut"):
        LOG.info("initramfs: dracut from the image")
        return chroot.run(["dracut", "--force", "--regenerate-all", "--add", "mdraid lvm"])
    raise ImageError("the image has neither update-initramfs nor dracut")


def lacking(boot_dir, kernels, needs):
    """Which of the programs in needs (mdadm, lvm) some kernel's initramfs in boot_dir lacks
    (in a bin or sbin directory); every one of them when one cannot be read."""
    if not needs:
        return []
    missing = set()
    for _version, initrd in kernels:
        try:
            names = initramfs_cpio.names(os.path.join(boot_dir, initrd))
        except initramfs_cpio.Unreadable as exc:
            LOG.info("initramfs: cannot read %s: %s", initrd, exc)
            return list(needs)
        programs = {name.rsplit("/", 1)[-1] for name in names
                    if name.rsplit("/", 2)[-2:-1] in (["bin"], ["sbin"])}
        missing |= {tool for tool in needs if tool not in programs}
    return sorted(missing)
