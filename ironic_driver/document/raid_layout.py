"""Ironic's software RAID configuration (target_raid_config, or raid.apply_configuration's
raid_config) as a native layout, built the way ironic-python-agent builds it.

What IPA accepts, and so do we: every logical disk's controller is `software`; one or two
logical disks; the first is RAID-1 and holds the instance's root filesystem; the second may be
RAID 0, 1, 1+0, 5 or 6; `size_gb` is a number of GiB, or `MAX` for the last one; the member
disks are the logical disks' `physical_disks` (root device hints, the same list for both), or
without them every disk of the node's inspected inventory that an erase would clear (not
those the node's skip_block_devices names, nor removable or read-only ones). On each member
disk: an ESP (UEFI: 550 MiB, the ESPs mirrored with md metadata 1.0, as IPA has done since
Victoria) or a bios_grub partition (BIOS on GPT), then one partition per logical disk.

What differs: the deploy's image is written onto the first array as its root filesystem (a
partition image), as with every layout here, and grub is installed from it onto each member;
IPA takes whole-disk images and installs their own bootloader onto each member. The second
array is left without a filesystem, as IPA leaves it.
"""

import math
import string

NAME_CHARS = set(string.ascii_letters + string.digits + "_.-")

LEVELS = {"0": 0, "1": 1, "1+0": 10, "5": 5, "6": 6}
MIN_MEMBERS = {0: 2, 1: 2, 10: 4, 5: 3, 6: 4}
ESP_MIB = 550
BIOS_GRUB_MIB = 1


class Refused(ValueError):
    """The configuration cannot be built here; the text says what to change."""


def _data_members(level, count):
    """How many members' worth of space an array of `count` members holds."""
    return {0: count, 1: 1, 10: count / 2, 5: count - 1, 6: count - 2}[level]


def logical_disks(raid_config, where):
    disks = (raid_config or {}).get("logical_disks") if isinstance(raid_config, dict) else None
    if not isinstance(disks, list) or not disks:
        raise Refused(f"{where}: no logical_disks")
    if len(disks) > 2:
        raise Refused(f"{where}: {len(disks)} logical disks; software RAID builds one or two "
                      "(as ironic-python-agent)")
    for i, ld in enumerate(disks):
        here = f"{where}.logical_disks[{i}]"
        if not isinstance(ld, dict):
            raise Refused(f"{here}: not an object")
        if ld.get("controller") != "software":
            raise Refused(f"{here}: controller {str(ld.get('controller'))[:40]!r}: only "
                          "'software' RAID is built by this interface (hardware RAID is the "
                          "BMC's RAID interface)")
        if str(ld.get("raid_level")) not in LEVELS:
            raise Refused(f"{here}: raid_level {str(ld.get('raid_level'))[:20]!r} is not one of "
                          f"{', '.join(LEVELS)}")
        size = ld.get("size_gb")
        if size == "MAX":
            if i != len(disks) - 1:
                raise Refused(f"{here}: size_gb MAX is only for the last logical disk")
        elif not isinstance(size, int) or isinstance(size, bool) or size <= 0:
            raise Refused(f"{here}: size_gb must be a positive number of GiB or MAX")
    if str(disks[0]["raid_level"]) != "1":
        raise Refused(f"{where}.logical_disks[0]: the first logical disk holds the root "
                      "filesystem and must be RAID-1 (as ironic-python-agent requires: a disk "
                      "failure must not leave the node unbootable)")
    hints = [ld.get("physical_disks") for ld in disks]
    if any(h is not None for h in hints) and any(h != hints[0] for h in hints):
        raise Refused(f"{where}: the logical disks name different physical_disks; both are "
                      "built on the same disks here")
    return disks


def from_inventory(disks):
    """Whether the member disks are picked from the inventory (no physical_disks given)."""
    return disks[0].get("physical_disks") is None


def member_hints(disks, inventory, skip, where):
    """Root device hints of each member disk, in order. skip: the node's skip_block_devices.

    Without physical_disks, "every disk" is every disk an erase would clear: not those
    skip_block_devices names, nor read-only or removable ones (a USB stick, virtual media).
    The medium the ramdisk boots from shows only there; its preflight refuses it (and any
    removable disk: these hints do not count as the operator naming one, see build())."""
    given = disks[0].get("physical_disks")
    if given is not None:
        if not isinstance(given, list) or not all(isinstance(h, dict) and h for h in given):
            raise Refused(f"{where}.logical_disks[0].physical_disks: a list of root device "
                          "hints (objects)")
        return [dict(h) for h in given]
    if inventory is None:
        raise Refused(f"{where}: no physical_disks, and the node has no inspected inventory "
                      "to take every disk from: name the member disks with physical_disks "
                      "hints, or inspect the node")
    left = _left_out(inventory, skip)
    members = [d for d in inventory if d["name"] not in left]
    if not members:
        raise Refused(f"{where}: no physical_disks, and every inventoried disk is left out ("
                      + "; ".join(f"{name}: {why}" for name, why in left.items())
                      + "): name the member disks with physical_disks hints")
    return [_hints_for(d, inventory) for d in members]


def _left_out(inventory, skip):
    """{disk name: why it is no member of arrays built on every disk}."""
    from provision_agent.plan import api
    if skip is None:
        skip = []
    if not isinstance(skip, list) or not all(isinstance(h, dict) and h for h in skip):
        raise Refused("node property skip_block_devices: must be a list of root device hints "
                      "(objects)")
    left = {}
    for i, hint in enumerate(skip):
        try:
            found = api.match_hints(inventory, hint)
        except ValueError as exc:
            raise Refused(f"node property skip_block_devices[{i}]: {exc}") from None
        for disk in found:
            left.setdefault(disk["name"], f"skip_block_devices[{i}] matches it")
    for disk in inventory:
        why = api.left_alone(disk)
        if why and disk["name"] not in left:
            left[disk["name"]] = why
    return left


def _hints_for(disk, inventory):
    """A hint that finds this disk and no other in the inventory: a serial or wwn when
    unique, else the kernel name."""
    for key in ("serial", "wwn"):
        value = disk.get(key)
        if value and sum(1 for d in inventory if d.get(key) == value) == 1:
            return {key: value}
    return {"name": disk["name"]}


def build(raid_config, hints, boot_mode, table, root_fs_type, where, picked=False):
    """The native layout (a dict, without images: the ironic data driver adds the deploy's).
    hints: member_hints(); picked: from_inventory(), marked on each disk so that the ramdisk
    does not take a serial found in an inventory as the operator naming a removable disk."""
    disks = logical_disks(raid_config, where)
    count = len(hints)
    layout = {"version": 1, "disks": [], "raids": [], "filesystems": []}
    levels = [LEVELS[str(ld["raid_level"])] for ld in disks]
    for n, level in enumerate(levels):
        if count < MIN_MEMBERS[level]:
            raise Refused(f"{where}.logical_disks[{n}]: RAID {disks[n]['raid_level']} needs at "
                          f"least {MIN_MEMBERS[level]} disks; {count} given")
    origin = where
    for i, match in enumerate(hints):
        parts = []
        if boot_mode == "uefi":
            parts.append({"id": f"esp{i}", "size": ESP_MIB, "type": "esp", "origin": origin})
        elif table == "gpt":
            parts.append({"id": f"bios{i}", "size": BIOS_GRUB_MIB, "type": "bios_grub",
                          "origin": origin})
        for n, ld in enumerate(disks):
            size = "remaining" if ld["size_gb"] == "MAX" else math.ceil(
                ld["size_gb"] * 1024 / _data_members(levels[n], count))
            parts.append({"id": f"md{n}-{i}", "size": size, "type": "raid", "origin": origin})
        disk = {"id": f"raid-disk{i}", "match": match, "table": table, "partitions": parts,
                "origin": f"{origin} (member {i})"}
        if picked:
            disk["from_inventory"] = True
        layout["disks"].append(disk)
    if boot_mode == "uefi":
        layout["raids"].append({"id": "esp", "name": "esp", "level": 1, "metadata": "1.0",
                                "members": [f"esp{i}" for i in range(count)], "origin": origin})
        layout["filesystems"].append({"device": "esp", "type": "vfat", "mount": "/boot/efi",
                                      "label": "esp", "origin": origin})
    for n, ld in enumerate(disks):
        layout["raids"].append({"id": f"md{n}", "name": _name(ld, n), "level": levels[n],
                                "members": [f"md{n}-{i}" for i in range(count)],
                                "origin": f"{where}.logical_disks[{n}]"})
    layout["filesystems"].append({"device": "md0", "type": root_fs_type, "mount": "/",
                                  "origin": f"{where}.logical_disks[0]"})
    return layout


def _name(ld, n):
    name = ld.get("volume_name")
    if isinstance(name, str) and 0 < len(name) <= 32 and set(name) <= NAME_CHARS:
        return name
    return f"md{n}"
