"""Waiting for the kernel and udev to catch up after we change block devices.

The known races: the kernel refuses to re-read a partition table for a moment after a tool
closed the disk (EBUSY while udev still probes it), and device nodes appear only after udev
processed the uevents. Both are retried for a bounded time, then fail with the tool's error.
"""

import logging
import os

from provision_agent.errors import CommandError, ProvisionError

LOG = logging.getLogger(__name__)

SETTLE_TIMEOUT = 120


def settle(runner, timeout=SETTLE_TIMEOUT):
    # settle fails when the queue does not drain in time; that alone is not an error for us:
    # the callers check for the devices they need.
    runner.run(["udevadm", "settle", f"--timeout={timeout}"], check=False, timeout=timeout + 30)


def _reread(runner, disk):
    # here: tenacity imports asyncio, start-up a run without retries need not pay
    import tenacity
    tenacity.Retrying(
        stop=tenacity.stop_after_attempt(6), wait=tenacity.wait_fixed(1),
        retry=tenacity.retry_if_exception_type(CommandError), reraise=True,
        before_sleep=lambda rs: LOG.info("re-reading the partition table failed (attempt %d), "
                                         "retrying", rs.attempt_number))(_reread_once, runner, disk)


def _reread_once(runner, disk):
    settle(runner)
    try:
        runner.run(["partprobe", disk])
    except CommandError:
        runner.run(["blockdev", "--rereadpt", disk])


def is_device_mapper(device):
    return os.path.basename(os.path.realpath(device)).startswith("dm-")


def _sysfs_children(disk, sys_block):
    """(directory, name) of each entry under disk's sysfs node, or None when sysfs does not
    know the disk."""
    base = os.path.join(sys_block, os.path.basename(os.path.realpath(disk)))
    try:
        return [(os.path.join(base, entry), entry) for entry in sorted(os.listdir(base))]
    except OSError:
        return None


def kernel_partitions(disk, sys_block="/sys/class/block"):
    """{number: (start, size)} of the partitions the kernel has on disk now (sysfs, in
    512-byte sectors), or None when sysfs does not know the disk."""
    children = _sysfs_children(disk, sys_block)
    if children is None:
        return None
    found = {}
    for path, _ in children:
        try:
            number, start, size = (int(_read(os.path.join(path, name)))
                                    for name in ("partition", "start", "size"))
        except (OSError, ValueError):
            continue        # not a partition (queue/, holders/, power/, ...)
        found[number] = (start, size)
    return found


def partition_node(disk, number, sys_block="/sys/class/block"):
    """The kernel's device for partition `number` of disk (/dev/sda1, /dev/nvme0n1p1), or
    None when the kernel shows no such partition."""
    for path, name in _sysfs_children(disk, sys_block) or []:
        try:
            if int(_read(os.path.join(path, "partition"))) == number:
                return "/dev/" + name
        except (OSError, ValueError):
            continue
    return None


def _read(path):
    with open(path) as f:
        return f.read().strip()


def _shows(found, expected):
    # an extended partition's size is the kernel's own (two sectors): only its start counts
    return found is not None and set(found) == set(expected) and all(
        found[n][0] == start and size in (None, found[n][1])
        for n, (start, size) in expected.items())


def reread_partitions(runner, disk, expected=None, sys_block="/sys/class/block"):
    """Make the kernel see disk's new partition table (partprobe, else blockdev --rereadpt).

    expected, {number: (start, size or None)}: the table just written. When the kernel
    already shows exactly that (sgdisk and sfdisk re-read the table they write, and nothing
    held the disk), partprobe is not run: 0.5-0.8 s a disk in the VM, and a mismatch still
    falls back to it. A multipath map has no kernel partitions: its partitions are dm maps
    that the distribution's kpartx udev rule keeps in step with the table on a change event
    (partprobe would add a second set under its own names, which the kernel refuses as busy).
    """
    if is_device_mapper(disk):
        settle(runner)
        runner.run(["udevadm", "trigger", "--action=change", disk])
    elif expected is not None and _shows(kernel_partitions(disk, sys_block), expected):
        LOG.info("%s: the kernel already has the new partition table", disk)
    else:
        _reread(runner, disk)
    settle(runner)


class DeviceMissing(ProvisionError):
    pass


def wait_for_devices(runner, devices, timeout=60, exists=os.path.exists):
    """Wait until every path in devices exists; raise DeviceMissing naming those that do not."""
    devices = list(devices)
    if all(exists(d) for d in devices):
        return
    import tenacity  # see _reread

    @tenacity.retry(stop=tenacity.stop_after_delay(timeout), wait=tenacity.wait_fixed(0.5),
                    retry=tenacity.retry_if_exception_type(DeviceMissing), reraise=True)
    def check():
        missing = [d for d in devices if not exists(d)]
        if missing:
            settle(runner, timeout=10)
            raise DeviceMissing(f"devices did not appear within {timeout}s: "
                                f"{', '.join(missing)}")

    check()
