"""This machine's disks, as the recorded inventories describe them (plan/inventory.py)."""

from provision_agent.drivers import discovery, udev
from provision_agent.plan import inventory


def discover(runner=None, loops=()):
    """This machine's disks, through udev; with a runner, once udev's queue has drained
    (bounded: drivers/udev.py). A disk whose events udev has not processed yet is listed with
    no WWN, serial or by-path link, so no hint finds it: with many disks the ramdisk's own
    settle at boot can give up first (27 SCSI disks under TCG, benchmarks/many_disks.py), and
    a shelf's disks can still be arriving. ironic-python-agent settles before listing too.
    loops: the loop devices listed as disks too (--allow_loop_devices), none by default."""
    if runner is not None:
        udev.settle(runner)
    return [inventory.normalize(d) for d in discovery.discover_disks(loops=loops)]


def optical():
    """This machine's optical drives (virtual media, DVD), never disks to write to."""
    return discovery.discover_optical()


def with_tables(disks, runner):
    """disks, each with its partition table as `sfdisk --json` gives it (null: none), for the
    partitions kept if the disk holds them (plan/existing.py)."""
    from provision_agent.drivers import partitions
    return [dict(d, partition_table=partitions.read_table(runner, d["name"])) for d in disks]
