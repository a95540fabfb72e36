"""This machine's disks, as the recorded inventories describe them (plan/inventory.py)."""

from provision_agent.drivers import discovery
from provision_agent.plan import inventory


def discover():
    """This machine's disks, through udev."""
    return [inventory.normalize(d) for d in discovery.discover_disks()]
