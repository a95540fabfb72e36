"""This machine's disks through udev, as ironic-python-agent's inventory describes them.

Only whole disks a provisioner could write to are listed: no loop, ram, zram, optical, md or
device-mapper devices, nothing of size 0.
"""

import logging

import pyudev

LOG = logging.getLogger(__name__)

SKIP_PREFIXES = ("loop", "ram", "zram", "sr", "md", "dm-", "nbd", "fd")


def _attr(device, name):
    try:
        value = device.attributes.get(name)
    except (KeyError, OSError):
        return None
    if value is None:
        return None
    return value.decode(errors="replace").strip() if isinstance(value, bytes) else str(value)


def _links(device, prefix):
    return sorted(link for link in device.device_links if link.startswith(prefix))


def describe(device):
    """One disk dict (IPA field names) from a pyudev Device, or None to leave it out."""
    name = device.sys_name
    if name.startswith(SKIP_PREFIXES) or device.get("DEVTYPE") != "disk":
        return None
    sectors = _attr(device, "size")
    size = int(sectors) * 512 if sectors and sectors.isdigit() else 0
    if size == 0:
        return None
    by_path = _links(device, "/dev/disk/by-path/")
    rotational = _attr(device, "queue/rotational")
    serial = device.get("ID_SERIAL_SHORT") or device.get("ID_SERIAL") or _attr(device, "serial")
    parent = device.find_parent("scsi")
    return {
        "name": device.device_node or f"/dev/{name}",
        "size": size,
        "model": device.get("ID_MODEL") or _attr(device, "device/model"),
        "vendor": device.get("ID_VENDOR") or _attr(device, "device/vendor"),
        "serial": serial,
        "wwn": device.get("ID_WWN"),
        "rotational": rotational == "1" if rotational is not None else None,
        "removable": _attr(device, "removable") == "1",
        "read_only": _attr(device, "ro") == "1",
        "hctl": parent.sys_name if parent is not None else None,
        "by_path": by_path[0] if by_path else None,
        "by_id": _links(device, "/dev/disk/by-id/"),
    }


def discover_disks(context=None):
    context = context or pyudev.Context()
    disks = []
    for device in context.list_devices(subsystem="block", DEVTYPE="disk"):
        d = describe(device)
        if d:
            disks.append(d)
    LOG.debug("discovered disks: %s", ", ".join(d["name"] for d in disks) or "none")
    return sorted(disks, key=lambda d: d["name"])

