"""Whole-disk images against their disks' logical sector size, before the run's first write.

A whole-disk image whose partition table was made for other sectors than its disk's cannot
boot there (drivers/image_sectors.py says why). The writer refuses it as it streams, before
any of the image's bytes reach the disk, but the plan's wipe of that disk has run by then;
here the head of each such image is read (drivers/images/disk_head.py: bounded, the download
closed there) and the image refused while the disk still holds all it held. The writer's own
check stays as the last line of defence: for an image whose head cannot be read here within
the bounds, and for an image that changed on its server since.
"""

import logging

from provision_agent import redact
from provision_agent.drivers import image_sectors, partitions

LOG = logging.getLogger(__name__)


def whole_disk(step):
    """A write_image step that writes a partition table onto its disk."""
    return step.kind == "write_image" and (
        step.args.get("format") == "disk"
        or (step.args.get("format") == "qcow2" and bool(step.args.get("whole_disk"))))


def check(steps, options, runner):
    """Refuse (ImageError, exit 5) the first whole-disk image made for other sectors than its
    disk's; options: the run's image options (credentials, TLS, stall limits)."""
    wanted = [s for s in steps if whole_disk(s)]
    if not wanted:
        return
    from provision_agent.drivers.images import write_step  # heavy; whole-disk images only
    for step in wanted:
        device, shown = step.args["device"], redact.url(step.args["uri"])
        sector = partitions.logical_sector_size(device)
        head = write_step.disk_head(step.args, options, runner)
        if head is not None:
            image_sectors.check(head, device, sector, shown, before_run=True)
            LOG.info("image %s: its partition table checked against %s (%s-byte logical "
                     "sectors) before the run", shown, device, sector)
