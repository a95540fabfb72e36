"""Regenerate the target's initramfs with the tool the image ships (detected, not assumed)."""

import logging

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
