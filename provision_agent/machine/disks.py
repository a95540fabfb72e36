"""This machine's disks, as the recorded inventories describe them (plan/inventory.py)."""

from provision_agent.drivers import discovery
from provision_agent.plan import inventory


def discover():
    """This machine's disks, through udev."""
    return [inventory.normalize(d) for d in discovery.discover_disks()]


def optical():
    """This machine's optical drives (virtual media, DVD), never disks to write to."""
    return discovery.discover_optical()


def with_tables(disks, runner):
    """disks, each with its partition table as `sfdisk --json` gives it (null: none), for the
    partitions kept if the disk holds them (plan/existing.py)."""
    from provision_agent.drivers import partitions
    return [dict(d, partition_table=partitions.read_table(runner, d["name"])) for d in disks]
