"""Regenerate the target's initramfs with the tool the image ships (detected, not assumed)."""

import logging
import os

from provision_agent.drivers import dracut, initramfs_cpio
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

# One build per installed kernel, every module copied and compressed by the image's scripts:
# 5-6 minutes for one kernel on the VM bench's 1-vCPU emulated machine, past the runner's
# 600 s when three such machines shared the host's two cores. Whatever the image does here,
# the conductor's deploy_timeout still ends the whole run.
REBUILD_TIMEOUT = 1800


def tool(chroot):
    """The image's initramfs tool: update-initramfs, else dracut, else None."""
    return next((t for t in ("update-initramfs", "dracut") if chroot.has(t)), None)


def regenerate(chroot, versions=(), modules=()):
    """versions, modules: for dracut, the kernels in /boot (each rebuilt with --kver; none:
    --regenerate-all) and the modules / needs (dracut.py)."""
    found = tool(chroot)
    if found == "update-initramfs":
        LOG.info("initramfs: update-initramfs from the image")
        return chroot.run(["update-initramfs", "-u", "-k", "all"], timeout=REBUILD_TIMEOUT)
    if found == "dracut":
        LOG.info("initramfs: dracut from the image for %s%s", ", ".join(versions) or "every "
                 "kernel", f", adding {' '.join(modules)}" if modules else "")
        return dracut.rebuild(chroot, list(versions), list(modules), REBUILD_TIMEOUT)
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
