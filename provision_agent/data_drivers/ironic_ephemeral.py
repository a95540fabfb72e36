"""Ironic's ephemeral and swap partitions, and instance_info/preserve_ephemeral: kept as
ironic-python-agent keeps it (partition_utils.work_on_disk), in the classic layout and in a
given one (docs/ironic-format.md)."""

from provision_agent.data_drivers import ironic_fields as fields


def _items(obj, key):
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []


def partitions(info, doc, parts, add, preserve):
    """Ironic's ephemeral0 and swap1 partitions. With preserve_ephemeral (a rebuild that keeps
    the tenant's ephemeral data, as ironic-python-agent's partition_utils.work_on_disk does)
    ephemeral0 is kept where the disk has it, nothing written to it; a disk without it gets
    it created (plan/existing.py)."""
    eph = fields.whole_number(info, "ephemeral_gb", add)
    if eph:
        parts.append({"id": "ephemeral0", "size": f"{eph}GiB",
                      "origin": "instance_info.ephemeral_gb"})
        if preserve:
            parts[-1]["keep"] = "if_present"
            parts[-1]["origin"] = ("instance_info.ephemeral_gb (kept: "
                                   "instance_info.preserve_ephemeral)")
        doc["filesystems"].append({"device": "ephemeral0",
                                   "type": info.get("ephemeral_format") or "ext4",
                                   "label": "ephemeral0",
                                   "origin": "instance_info.ephemeral_format"})
    swap = fields.whole_number(info, "swap_mb", add)
    if swap:
        parts.append({"id": "swap1", "size": swap, "type": "swap",
                      "origin": "instance_info.swap_mb"})
        doc["filesystems"].append({"device": "swap1", "type": "swap", "label": "swap1",
                                   "origin": "instance_info.swap_mb"})


def in_layout(doc, info, add, warnings):
    """In a given layout the ephemeral partition is the one sized "ephemeral_gb": kept if the
    disk holds it. A logical volume so sized cannot be kept alone (only with its volume
    group): refused, rather than destroying what the rebuild asked to keep."""
    found = False
    for disk in _items(doc, "disks"):
        for part in _items(disk, "partitions"):
            if isinstance(part, dict) and part.get("size") == "ephemeral_gb":
                found = True
                part.setdefault("keep", "if_present")
    for i, vg in enumerate(_items(doc, "volume_groups")):
        for j, lv in enumerate(_items(vg, "logical_volumes")):
            if isinstance(lv, dict) and lv.get("size") == "ephemeral_gb":
                found = True
                if not vg.get("keep"):
                    add(f"layout.volume_groups[{i}].logical_volumes[{j}]",
                        "instance_info.preserve_ephemeral asks to keep this logical volume "
                        "(sized ephemeral_gb), but its volume group is not kept: a logical "
                        "volume is kept with its whole volume group (keep: true)")
    if not found and fields.whole_number(info, "ephemeral_gb", add):
        warnings.append("instance_info.preserve_ephemeral: the layout sizes no partition or "
                        "logical volume by ephemeral_gb, so none is kept as the ephemeral one")
