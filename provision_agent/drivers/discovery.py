"""This machine's disks through udev, as ironic-python-agent's inventory describes them.

Only whole disks a provisioner could write to are listed: no loop, ram, zram, optical, md or
device-mapper devices, nothing of size 0. A multipath disk is listed once, as its dm-multipath
device, with its paths under "multipath": writing to one path behind multipathd's back
corrupts the disk, so the paths are never disks of their own.
"""

import logging
import time

import pyudev

from provision_agent.drivers import blockinfo

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


def _block_sizes(device):
    """The disk's logical and physical block sizes in bytes. sysfs `size` counts 512-byte
    units whatever the logical size; the tables are written in logical sectors."""
    out = {}
    for key in ("logical_block_size", "physical_block_size"):
        value = _attr(device, f"queue/{key}")
        out[key] = int(value) if value and value.isdigit() and int(value) else 512
    return out


def transport(device):
    """How the disk is attached, with lsblk's TRAN names where we can tell: usb, nvme, sata,
    sas, virtio; None when udev and sysfs do not say. A USB disk is left alone by rules that
    pick disks (plan/inventory.left_alone) even when it does not flag itself removable."""
    path = device.sys_path or ""
    if "/usb" in path or device.get("ID_BUS") == "usb":
        return "usb"
    if device.sys_name.startswith("nvme"):
        return "nvme"
    if device.get("ID_BUS") == "ata" or "/ata" in path:
        return "sata"
    if "/end_device-" in path:      # the SAS transport class: a disk behind a SAS HBA
        return "sas"
    if "/virtio" in path and device.find_parent("scsi") is None:
        return "virtio"
    return None


def controller(device):
    """The kernel driver of the PCI device the disk hangs off (megaraid_sas, mptsas,
    sym53c8xx, vmw_pvscsi, ahci, nvme, virtio-pci, xhci_hcd): which HBA it is behind."""
    parent = device.find_parent("pci")
    return getattr(parent, "driver", None) if parent is not None else None


def describe(device, loops=()):
    """One disk dict (IPA field names) from a pyudev Device, or None to leave it out. loops:
    loop devices (/dev/loopN) listed all the same (--allow_loop_devices)."""
    name = device.sys_name
    loop_named = name.startswith("loop") and f"/dev/{name}" in loops
    if (name.startswith(SKIP_PREFIXES) and not loop_named) or device.get("DEVTYPE") != "disk":
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
        "tran": transport(device),
        "controller": controller(device),
        **_block_sizes(device),
    }


def describe_optical(device):
    """An optical drive (a BMC's virtual-media CD-ROM, a DVD drive) as `provision inventory`
    shows it beside the disks: never a disk a plan may name, listed so that an operator sees
    what the machine has. size: the medium's bytes, 0 when the drive is empty."""
    sectors = _attr(device, "size")
    by_path = _links(device, "/dev/disk/by-path/")
    parent = device.find_parent("scsi")
    return {
        "name": device.device_node or f"/dev/{device.sys_name}",
        "type": "cdrom",
        "size": int(sectors) * 512 if sectors and sectors.isdigit() else 0,
        "model": device.get("ID_MODEL") or _attr(device, "device/model"),
        "vendor": device.get("ID_VENDOR") or _attr(device, "device/vendor"),
        "serial": device.get("ID_SERIAL_SHORT") or device.get("ID_SERIAL"),
        "label": device.get("ID_FS_LABEL"),
        "removable": True,
        "read_only": True,
        "hctl": parent.sys_name if parent is not None else None,
        "by_path": by_path[0] if by_path else None,
        "tran": transport(device),
        "controller": controller(device),
    }


def discover_optical(context=None):
    """The optical drives (sr*), for `provision inventory` only: no plan, erase or RAID
    interface ever sees them as disks."""
    context = context or pyudev.Context()
    found = [describe_optical(d) for d in context.list_devices(subsystem="block", DEVTYPE="disk")
             if d.sys_name.startswith("sr")]
    return sorted(found, key=lambda d: d["name"])


def is_multipath_map(device):
    return device.sys_name.startswith("dm-") and \
        (device.get("DM_UUID") or _attr(device, "dm/uuid") or "").startswith("mpath-")


def describe_multipath(device, paths):
    """One disk dict for a dm-multipath map: identity from its paths (they are one LUN), the
    name multipathd gave it, and each path's name, by-path link and SCSI address."""
    sectors = _attr(device, "size")
    size = int(sectors) * 512 if sectors and sectors.isdigit() else 0
    described = [d for d in (describe(p) for p in paths) if d]
    if size == 0 or not described:
        return None
    first = described[0]
    dm_name = device.get("DM_NAME") or _attr(device, "dm/name") or device.sys_name
    uuid = device.get("DM_UUID") or _attr(device, "dm/uuid")
    by_id = set(_links(device, "/dev/disk/by-id/"))
    for d in described:
        by_id.update(d["by_id"])
    return {
        "name": f"/dev/mapper/{dm_name}",
        "size": size,
        "model": first["model"],
        "vendor": first["vendor"],
        "serial": first["serial"],
        "wwn": first["wwn"],
        "rotational": first["rotational"],
        "removable": False,
        "read_only": _attr(device, "ro") == "1",
        "hctl": None,
        "by_path": None,
        "by_id": sorted(by_id),
        "tran": first["tran"],
        **_block_sizes(device),
        "multipath": {"wwid": uuid.removeprefix("mpath-"), "dm": f"/dev/{device.sys_name}",
                      "paths": [{"name": d["name"], "by_path": d["by_path"], "hctl": d["hctl"]}
                                for d in sorted(described, key=lambda d: d["name"])]},
    }


def discover_disks(context=None, loops=()):
    started = time.monotonic()
    context = context or pyudev.Context()
    devices = list(context.list_devices(subsystem="block", DEVTYPE="disk"))
    maps = {d.sys_name: d for d in devices if is_multipath_map(d)}
    paths = {name: [] for name in maps}
    disks = []
    for device in devices:
        owner = next((h for h in blockinfo.holders_at(device.sys_path) if h in maps), None)
        if owner:
            paths[owner].append(device)
            continue
        d = describe(device, loops)
        if d:
            disks.append(d)
    for name, device in maps.items():
        d = describe_multipath(device, paths[name])
        if d:
            disks.append(d)
    # the seconds are what benchmarks/many_disks.py reads: discovery as the disk count grows
    LOG.debug("discovered %d disks in %.2fs: %s", len(disks), time.monotonic() - started,
              ", ".join(d["name"] for d in disks) or "none")
    return sorted(disks, key=lambda d: d["name"])

