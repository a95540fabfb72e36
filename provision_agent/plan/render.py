"""Printable forms of a plan: a layout tree for people, one JSON document for programs."""

import json

from provision_agent import redact
from provision_agent.plan import iscsi
from provision_agent.plan.units import human


def layout_dict(res):
    lay = res.layout
    parts = {p.id: p for _, p in lay.partitions()}
    kept = lay.kept_ids()
    return {
        "disks": [{
            "id": d.id, "device": res.devices.get(d.id), "size": res.sizes.get(d.id),
            "serial": res.disks.get(d.id, {}).get("serial"), "table": d.table,
            "matched_by": res.matched_by.get(d.id),
            **({"iscsi": iscsi.entry(d.iscsi)} if d.iscsi else {}),
            **_block_sizes(res, d.id),
            "partitions": [{
                "id": p.part_id, "number": p.number, "device": p.device, "offset": p.offset,
                "size": p.size, "kind": p.kind,
                "type": parts[p.part_id].type if p.part_id else "extended",
                "keep": bool(p.part_id and parts[p.part_id].keep),
                "wipe": parts[p.part_id].wipe if p.part_id else None,
            } for p in res.placed.get(d.id, [])],
        } for d in lay.disks],
        "raids": [{
            "id": r.id, "device": res.devices[r.id], "level": r.level, "metadata": r.metadata,
            "members": [res.devices.get(m) for m in r.members],
            "spares": [res.devices.get(s) for s in r.spares], "size": res.sizes.get(r.id),
            "keep": r.keep, "wipe": r.wipe,
            **({"table": r.table, "partitions": [{
                "id": p.part_id, "number": p.number, "device": p.device, "offset": p.offset,
                "size": p.size, "kind": p.kind, "keep": parts[p.part_id].keep,
                "wipe": parts[p.part_id].wipe} for p in res.placed.get(r.id, [])]}
               if r.partitions else {}),
        } for r in lay.raids],
        **({"bcache": [{
            "id": b.id, "name": b.name, "device": res.devices.get(b.id),
            "backing_device": res.devices.get(b.backing),
            "cache_device": res.devices.get(b.cache) if b.cache else None,
            "cache_mode": b.cache_mode if b.cache else "none", "size": res.sizes.get(b.id),
            **({"table": b.table, "partitions": [{
                "id": p.part_id, "number": p.number, "device": p.device, "offset": p.offset,
                "size": p.size} for p in res.placed.get(b.id, [])]} if b.partitions else {}),
        } for b in lay.bcache]} if lay.bcache else {}),
        "volume_groups": [{
            "id": vg.id, "name": vg.name, "pvs": [res.devices.get(p) for p in vg.pvs],
            "size": res.sizes.get(vg.id), "keep": vg.keep,
            "logical_volumes": [{
                "id": lv.id, "name": lv.name, "device": res.devices[lv.id],
                "size": res.sizes.get(lv.id), "stripes": lv.stripes, "keep": vg.keep,
            } for lv in vg.logical_volumes],
        } for vg in lay.volume_groups],
        "filesystems": [{
            "device": res.devices.get(fs.device), "id": fs.device, "type": fs.type,
            "mount": fs.mount, "label": fs.label, "mount_options": fs.mount_options,
            "keep": fs.device in kept,
        } for fs in lay.filesystems],
        "images": [{"uri": im.uri, "format": im.format, "target": im.target}
                   for im in lay.images],
        **({"mounts": [{"type": m.type, "mount": m.mount, "source": m.source,
                        "mount_options": m.options()} for m in lay.mounts]}
           if lay.mounts else {}),
    }


def _block_sizes(res, disk_id):
    if disk_id not in res.block_sizes:
        return {}
    logical, physical, recorded = res.block_sizes[disk_id]
    return {"logical_block_size": logical, "physical_block_size": physical,
            "block_sizes_recorded": recorded}


def _sectors_text(res, disk_id):
    if disk_id not in res.block_sizes:
        return ""
    logical, physical, recorded = res.block_sizes[disk_id]
    text = f"{logical}-byte sectors" + (f" ({physical} physical)" if physical != logical else "")
    return "  " + text + ("" if recorded else " (assumed: the inventory does not record them)")


def warnings(res):
    return list(res.layout.warnings) + list(res.warnings)


def plan_json(planned):
    # Plans are printed and logged: URLs, passwords and configdrive contents stay out.
    return json.dumps(redact.document({"layout": layout_dict(planned.resolved),
                                       "steps": [s.to_dict() for s in planned.steps],
                                       "warnings": warnings(planned.resolved)}), indent=2)


def _partition_lines(placed, types, tail, mark):
    """The tree lines of a disk's or an array's partitions."""
    lines = []
    for i, p in enumerate(placed):
        branch = "└─" if i == len(placed) - 1 else "├─"
        t = tail(p.part_id) if p.part_id else ""
        lines.append(f"  {branch} {p.device}  {human(p.size):>8}  "
                     f"{types[p.part_id] if p.part_id else 'extended'}"
                     + (mark(p.part_id) if p.part_id else "") + (f"  → {t}" if t else ""))
    return lines


def _mount_lines(lay):
    return [f"{m.type}{f' {m.source}' if m.source else ''}  → {m.mount} ({m.options()}), "
            f"fstab only" for m in lay.mounts]


def _users(res):
    """{device id: what uses it (an array, a bcache device, a volume group)}"""
    users = {}
    for r in res.layout.raids:
        for m in r.members + r.spares:
            users[m] = f"md {res.devices[r.id]}" + (" (spare)" if m in r.spares else "")
    for b in res.layout.bcache:
        users[b.backing] = f"backing of bcache {res.devices.get(b.id)}"
        if b.cache:
            users.setdefault(b.cache, f"cache of bcache {res.devices.get(b.id)}")
    for vg in res.layout.volume_groups:
        for pv in vg.pvs:
            users[pv] = f"pv of VG {vg.name}"
    return users


def plan_text(planned):
    res = planned.resolved
    lay = res.layout
    fs_on = {fs.device: fs for fs in lay.filesystems}
    used_by = _users(res)

    kept = lay.kept_ids()

    def tail(obj_id):
        if obj_id in fs_on:
            fs = fs_on[obj_id]
            what = fs.type + (f" {fs.mount}" if fs.mount else "")
            return what + (f" [{fs.label}]" if fs.label else "") + \
                (" (kept: not re-created)" if obj_id in kept else "")
        return used_by.get(obj_id, "")

    wiped = {x.id: x.wipe for x in [p for _, p in lay.partitions()] + lay.raids
             if x.keep and x.wipe}

    def mark(obj_id):
        if obj_id in wiped:
            return f"  kept in place, contents wiped ({wiped[obj_id]})"
        return "  kept" if obj_id in kept else ""

    lines = [f"Warning: {w}" for w in warnings(res)] + ["Layout:"]
    types = {x.id: x.type for _, x in lay.partitions()}

    def partition_lines(holder_id):
        lines.extend(_partition_lines(res.placed.get(holder_id, []), types, tail, mark))

    for d in lay.disks:
        table = d.table if d.partitions else f"empty {d.table} table" if d.table_named \
            else "whole disk"
        lines.append(f"{res.devices[d.id]}  {human(res.sizes[d.id])}  {table}"
                     + (_sectors_text(res, d.id) if d.partitions else "")
                     + f"  (disk {d.id}, matched by {res.matched_by.get(d.id)})"
                     + (f"  → {tail(d.id)}" if tail(d.id) else ""))
        partition_lines(d.id)
    for r in lay.raids:
        lines.append(f"{res.devices[r.id]}  RAID{r.level}  ~{human(res.sizes.get(r.id, 0))}"
                     f"  metadata {r.metadata}" + (f"  {r.table}" if r.partitions else "")
                     + ((mark(r.id) or "  kept") + ": assembled as it is" if r.keep else "")
                     + (f"  → {tail(r.id)}" if tail(r.id) else ""))
        partition_lines(r.id)
    for b in lay.bcache:
        lines.append(f"{res.devices[b.id]}  bcache  ~{human(res.sizes.get(b.id, 0))}  "
                     + (b.cache_mode if b.cache else "no cache") + (f"  {b.table}" if
                     b.partitions else "") + (f"  → {tail(b.id)}" if tail(b.id) else ""))
        partition_lines(b.id)
    for vg in lay.volume_groups:
        lines.append(f"VG {vg.name}  ~{human(res.sizes.get(vg.id, 0))}"
                     + ("  kept: activated as it is, not re-created" if vg.keep else ""))
        for i, lv in enumerate(vg.logical_volumes):
            branch = "└─" if i == len(vg.logical_volumes) - 1 else "├─"
            size = human(res.sizes.get(lv.id, 0))
            lines.append(f"  {branch} {res.devices[lv.id]}  {size:>8}"
                         + ("  (remaining)" if lv.size.remaining else "") + mark(lv.id)
                         + (f"  → {tail(lv.id)}" if tail(lv.id) else ""))
    lines += _mount_lines(lay)
    lines.append("")
    lines.append(f"Plan ({len(planned.steps)} steps):")
    for i, s in enumerate(planned.steps, 1):
        lines.append(f"  {i:3d}. [{s.kind}] {s.description}")
    return redact.text("\n".join(lines))
