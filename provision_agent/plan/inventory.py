"""Which disks a machine has: read from a recorded inventory or discovered live.

The format is ironic-python-agent's (what Ironic stores from inspection): either
{"inventory": {"disks": [...]}} or the bare {"disks": [...]}. Disk fields: name, size (bytes),
model, serial, wwn, vendor, rotational, by_path, hctl, and optionally by_id (a list of links)
and, for a multipath disk, multipath: {"wwid", "paths": [{"name", "by_path", "hctl"}]}.
A disk listed as one path of a multipath disk is not a disk of its own here.

logical_block_size and physical_block_size (bytes, as sysfs queue/ says) are what partitions
are aligned to and the tables written in; `provision inventory` records them. An inventory
that does not (ironic-python-agent's, or one recorded by an older version) is read as 512 and
512, and the plan says that it assumed so.
"""

import json
import logging
import re

from provision_agent.errors import InputError, Problem
from provision_agent.plan import hints as ironic_hints

LOG = logging.getLogger(__name__)

DEFAULT_BLOCK_SIZE = 512
LOGICAL_SIZES = (512, 1024, 2048, 4096)


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as exc:
        raise InputError([Problem(path, f"cannot read inventory: {exc.strerror}")])
    except json.JSONDecodeError as exc:
        raise InputError([Problem(f"{path}:{exc.lineno}:{exc.colno}",
                                  f"inventory is not valid JSON: {exc.msg}")])
    return from_document(doc, path)


def from_document(doc, where="inventory"):
    inv = doc.get("inventory", doc) if isinstance(doc, dict) else None
    disks = inv.get("disks") if isinstance(inv, dict) else None
    if not isinstance(disks, list):
        raise InputError([Problem(where, "no disks list: expected {\"inventory\": {\"disks\": "
                                         "[...]}} or {\"disks\": [...]}")])
    problems = []
    result = []
    for i, d in enumerate(disks):
        if not isinstance(d, dict) or not isinstance(d.get("name"), str) \
                or not isinstance(d.get("size"), int) or isinstance(d.get("size"), bool):
            problems.append(Problem(f"{where}: disks[{i}]", "needs a name and a size in bytes"))
            continue
        bad = _block_size_problem(d)
        if bad:
            problems.append(Problem(f"{where}: disks[{i}]", bad))
            continue
        result.append(normalize(d))
    if problems:
        raise InputError(problems)
    # an inventory that lists the paths next to their multipath device (fuel-agent's did)
    paths = {p for d in result for p in path_names(d)}
    return [d for d in result if d["name"] not in paths]


def _block_size_problem(disk):
    logical = disk.get("logical_block_size", DEFAULT_BLOCK_SIZE)
    physical = disk.get("physical_block_size", logical)
    for key, value in (("logical_block_size", logical), ("physical_block_size", physical)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            return f"{key} must be a number of bytes, not {value!r}"
    if logical not in LOGICAL_SIZES:
        return (f"logical_block_size {logical} is not one partition tables are written for "
                f"({', '.join(map(str, LOGICAL_SIZES))})")
    if physical % logical:
        return f"physical_block_size {physical} is not a multiple of logical_block_size {logical}"
    return None


def block_sizes(disk):
    """(logical, physical, recorded): the disk's block sizes in bytes, and whether the
    inventory recorded them (False: 512 and 512 assumed)."""
    recorded = "logical_block_size" in disk
    logical = disk.get("logical_block_size", DEFAULT_BLOCK_SIZE)
    return logical, disk.get("physical_block_size", logical), recorded


def path_names(disk):
    """The kernel names of a multipath disk's paths (none for a plain disk)."""
    mp = disk.get("multipath")
    if not isinstance(mp, dict) or not isinstance(mp.get("paths"), list):
        return []
    return [normalize_name(p["name"]) for p in mp["paths"]
            if isinstance(p, dict) and isinstance(p.get("name"), str)]


def normalize_name(name):
    return name if name.startswith("/dev/") else "/dev/" + name


def normalize(disk):
    d = dict(disk)
    d["name"] = normalize_name(d["name"])
    by_id = d.get("by_id") or []
    d["by_id"] = [by_id] if isinstance(by_id, str) else list(by_id)
    return d


def left_alone(disk):
    """Why no program may pick this disk by itself (it is read-only, or removable: a USB
    stick, a card, virtual media), or None. What `provision erase` leaves alone without being
    told, and what the RAID interface leaves out of arrays built on "every disk". The transport
    is for ironic-python-agent's inventories, which give it (`tran`) but no removable flag."""
    if disk.get("read_only"):
        return "read-only"
    if disk.get("removable") or str(disk.get("tran") or "").lower() == "usb":
        return "removable (a USB stick, a card, virtual media)"
    return None


# Hints that name one disk (its identity or its place); the others (size, model, vendor,
# rotational) are rules, which a USB stick or a read-only disk may happen to satisfy.
NAMING_HINTS = ("name", "serial", "wwn", "wwn_with_extension", "wwn_vendor_extension",
                "by_path", "by_id", "hctl")


def names_a_disk(hints):
    return any(hints.get(h) for h in NAMING_HINTS)


def _matches_by_id(disk, link):
    if not link.startswith("/dev/"):
        link = "/dev/disk/by-id/" + link
    if disk.get("by_id"):
        return link in disk["by_id"]
    return _derived_by_id(disk, link)


def _derived_by_id(disk, link):
    """ironic-python-agent's inventories list no by-id links; udev builds them from the WWN
    (wwn-0x..., scsi-3...) and from the serial (ata-MODEL_SERIAL, virtio-SERIAL, ...)."""
    name = link.rsplit("/", 1)[-1]
    wwn = str(disk.get("wwn") or "").lower()
    if wwn and name.lower() in (f"wwn-{wwn}", "scsi-3" + wwn.removeprefix("0x")):
        return True
    serial = str(disk.get("serial") or "")
    return len(serial) >= 3 and name.startswith(("ata-", "scsi-", "nvme-", "virtio-", "usb-")) \
        and (name.endswith("_" + serial) or name.endswith("-" + serial))


def match(disks, hints):
    """Disks that satisfy every hint. Raises ValueError for a malformed hint."""
    hints = dict(hints)
    by_id = hints.pop("by_id", None)
    hints = full_paths(hints)
    candidates = [d for d in disks if by_id is None or _matches_by_id(d, by_id)]
    if not hints:
        return candidates
    plain = _plain_match(candidates, hints)
    if plain is not None:
        return plain
    return [d for d in candidates
            if any(True for _ in ironic_hints.find_devices_by_hints(_views(d, hints), hints))]


def full_paths(hints):
    """hints with a short name (sda) or by_path (pci-...) as the full path ironic_lib compares."""
    hints = dict(hints)
    for key, prefix in (("name", "/dev/"), ("by_path", "/dev/disk/by-path/")):
        value = hints.get(key)
        if isinstance(value, str) and not value.startswith(("/dev/", "s==", "s!=", "<")):
            hints[key] = prefix + value
    return hints


# ironic_lib's string hints, and the characters that neither its operator grammar nor its
# url-quoting give a meaning to
_STR_HINTS = frozenset({"name", "serial", "wwn", "wwn_with_extension", "wwn_vendor_extension",
                        "model", "vendor", "hctl", "by_path"})
_PLAIN = re.compile(r"[a-z0-9/_.:+-]+")


def _plain_match(candidates, hints):
    """What ironic_lib.utils.find_devices_by_hints finds for hints that are all plain string
    values (no operator): each side stripped and lower-cased, then equal. None when a hint or
    a device value is anything else. ironic_lib's import (oslo.utils compiles ~570 patterns)
    is 1 s of a provision in the TCG VM, and hand-written layouts name disks this way."""
    want = {}
    for key, value in hints.items():
        value = value.strip().lower() if isinstance(value, str) else None
        if key not in _STR_HINTS or not value or not _PLAIN.fullmatch(value):
            return None
        want[key] = value
    found = []
    for disk in candidates:
        for view in _views(disk, hints):
            have = {k: str(view.get(k)).strip().lower() for k in want}
            if any(v and not _PLAIN.fullmatch(v) for v in have.values()):
                return None
            if have == want:        # one view is enough, as for ironic_lib
                found.append(disk)
                break
    return found


def _views(disk, hints):
    """The disk as hints may see it: a multipath disk answers to the by-path link and SCSI
    address of each of its paths, as a root device hint written for one path expects."""
    views = [disk]
    mp = disk.get("multipath") or {}
    if "by_path" in hints or "hctl" in hints:
        for p in mp.get("paths") or []:
            if isinstance(p, dict):
                views.append(dict(disk, by_path=p.get("by_path"), hctl=p.get("hctl")))
    if "name" in hints and isinstance(mp.get("dm"), str):
        views.append(dict(disk, name=mp["dm"]))     # the map's kernel name, dm-N
    return views


def path_named(disks, hints):
    """(path name, multipath disk) when the name hint names one path of a multipath disk."""
    name = hints.get("name")
    if not isinstance(name, str) or name.startswith(("s==", "s!=", "<")):
        return None
    name = normalize_name(name)
    for d in disks:
        if name in path_names(d):
            return name, d
    return None
