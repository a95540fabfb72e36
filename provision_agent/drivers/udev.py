"""Waiting for the kernel and udev to catch up after we change block devices.

The known races: the kernel refuses to re-read a partition table for a moment after a tool
closed the disk (EBUSY while udev still probes it), and device nodes appear only after udev
processed the uevents. Both are retried for a bounded time, then fail with the tool's error.
"""

import logging
import os

import tenacity

from provision_agent.errors import CommandError, ProvisionError

LOG = logging.getLogger(__name__)

SETTLE_TIMEOUT = 120


def settle(runner, timeout=SETTLE_TIMEOUT):
    # settle fails when the queue does not drain in time; that alone is not an error for us:
    # the callers check for the devices they need.
    runner.run(["udevadm", "settle", f"--timeout={timeout}"], check=False, timeout=timeout + 30)


@tenacity.retry(stop=tenacity.stop_after_attempt(6), wait=tenacity.wait_fixed(1),
                retry=tenacity.retry_if_exception_type(CommandError), reraise=True,
                before_sleep=lambda rs: LOG.info("re-reading the partition table failed "
                                                 "(attempt %d), retrying", rs.attempt_number))
def _reread(runner, disk):
    settle(runner)
    try:
        runner.run(["partprobe", disk])
    except CommandError:
        runner.run(["blockdev", "--rereadpt", disk])


def is_device_mapper(device):
    return os.path.basename(os.path.realpath(device)).startswith("dm-")


def reread_partitions(runner, disk):
    """Make the kernel see disk's new partition table (partprobe, else blockdev --rereadpt).

    A multipath map has no kernel partitions: its partitions are dm maps that the
    distribution's kpartx udev rule keeps in step with the table on a change event (partprobe
    would add a second set under its own names, which the kernel refuses as busy).
    """
    if is_device_mapper(disk):
        settle(runner)
        runner.run(["udevadm", "trigger", "--action=change", disk])
    else:
        _reread(runner, disk)
    settle(runner)


class DeviceMissing(ProvisionError):
    pass


def wait_for_devices(runner, devices, timeout=60, exists=os.path.exists):
    """Wait until every path in devices exists; raise DeviceMissing naming those that do not."""
    devices = list(devices)

    @tenacity.retry(stop=tenacity.stop_after_delay(timeout), wait=tenacity.wait_fixed(0.5),
                    retry=tenacity.retry_if_exception_type(DeviceMissing), reraise=True)
    def check():
        missing = [d for d in devices if not exists(d)]
        if missing:
            settle(runner, timeout=10)
            raise DeviceMissing(f"devices did not appear within {timeout}s: "
                                f"{', '.join(missing)}")

    check()
