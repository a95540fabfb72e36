"""Bind a Layout to a machine's disks and compute every device path and size.

Problems found here are the machine's (a hint matching no disk or several, a disk too small for
its partitions, volume groups too small for their volumes): they exit 3, not 2.
"""

from dataclasses import dataclass, field

from provision_agent.errors import Problem
from provision_agent.plan import blocks, geometry, geometry_explicit, inventory, validate_kept
from provision_agent.plan.devnames import lv_device, mapper_device, md_device, multipath_link
from provision_agent.plan.loops import note as loop_note
from provision_agent.plan.resolve_bcache import size_and_place as resolve_bcache
from provision_agent.plan.units import MiB, align_up, human

EXTENT = 4 * MiB
PV_DATA_OFFSET = MiB
# cryptsetup's default LUKS2 header with its keyslots area: the data starts this far in.
LUKS2_HEADER = 16 * MiB


@dataclass
class Resolved:
    layout: object
    disks: dict = field(default_factory=dict)       # disk id -> inventory dict
    placed: dict = field(default_factory=dict)      # disk id -> [geometry.Placed]
    devices: dict = field(default_factory=dict)     # any block id -> device path
    sizes: dict = field(default_factory=dict)       # any block id -> bytes (md/vg estimates)
    vg_extents: dict = field(default_factory=dict)  # vg id -> extents available
    lv_sizes: dict = field(default_factory=dict)    # lv id -> (size_bytes | None, extents | None)
    matched_by: dict = field(default_factory=dict)  # disk id -> the hints that found the disk
    # disk id -> what its partitions' device names derive from (partition_base)
    partition_bases: dict = field(default_factory=dict)
    # disk id -> (logical, physical, recorded): block sizes in bytes, recorded False when the
    # inventory did not say and 512 was assumed
    block_sizes: dict = field(default_factory=dict)
    blocks: dict = field(default_factory=dict)      # any block id -> (logical, physical)
    luks_sector_sizes: dict = field(default_factory=dict)   # encrypted id -> sector size
    warnings: list = field(default_factory=list)    # shown with the plan


def partition_base(disk):
    """What partition device names are derived from: the disk itself, or for a multipath disk
    the by-id link of its map, since kpartx names partition maps by a delimiter the
    distribution picks but always gives them the UUID part<N>-mpath-<wwid>."""
    mp = disk.get("multipath")
    if isinstance(mp, dict) and isinstance(mp.get("wwid"), str) and mp["wwid"]:
        return multipath_link(mp["wwid"])
    return disk["name"]


def md_reserve(member_bytes):
    """Space mdadm keeps on each member for superblock, bitmap and data offset (upper bound).

    mdadm picks a data offset of up to 128 MiB, shrunk for small members to about 1/1024th of
    the member; 1 MiB more covers the superblock and internal bitmap.
    """
    return min(128 * MiB, max(MiB, member_bytes // 1024)) + MiB


def md_size(level, member_sizes):
    n, smallest = len(member_sizes), min(member_sizes)
    usable = smallest - md_reserve(smallest)
    data_disks = {0: n, 1: 1, 4: n - 1, 5: n - 1, 6: n - 2, 10: n / 2}[level]
    return max(0, int(usable * data_disks))


def resolve(layout, disks):
    """Returns (Resolved, problems). Run validate.check first: this assumes references hold.
    Everything the planner needs about devices and sizes is in Resolved: planning never comes
    back here."""
    res = Resolved(layout)
    problems = []
    taken = {}
    for disk in layout.disks:
        dev = _match(disks, disk, taken, res, problems)
        if dev is not None:
            _place(disk, dev, res, problems)
    _size_arrays(layout, res, problems)
    _place_on_arrays(layout, res, problems)
    resolve_bcache(layout, res, problems, _place)
    lvs = {lv.id for _, lv in layout.logical_volumes()}
    _size_encrypted([e for e in layout.encrypted if e.device not in lvs], res)
    _size_volume_groups(layout, res, problems)
    _size_encrypted([e for e in layout.encrypted if e.device in lvs], res)
    problems += blocks.propagate(layout, res)
    return res, problems


def _size_encrypted(volumes, res):
    """/dev/mapper/NAME, as large as its device less the LUKS2 header."""
    for e in volumes:
        res.devices[e.id] = mapper_device(e.name)
        if res.sizes.get(e.device) is not None:
            res.sizes[e.id] = max(0, res.sizes[e.device] - LUKS2_HEADER)


def _match(disks, disk, taken, res, problems):
    """The inventory disk this layout disk names, recorded in res; None (and a problem) when
    none, several, or one already taken."""
    where = disk.origin or disk.id
    try:
        disks, excluded = _without_excluded(disks, disk)
        hints, found, tie = _find(disks, disk)
    except ValueError as exc:
        problems.append(Problem(where, f"bad disk hint: {exc}"))
        return None
    picked = left = None
    if found and not inventory.names_a_disk(hints):
        found, left = _rule_found(found)
    if disk.pick == "smallest" and found:
        found, picked = _smallest(found)
    picked = "; ".join(filter(None, (picked, left)))
    if not found and picked:
        problems.append(Problem(where, f"every disk {_hint_text(hints)} matches is one no "
                                       f"program picks by itself ({picked}); name the disk "
                                       f"with a root device hint"))
        return None
    path = inventory.path_named(disks, hints)
    if path:
        name, mp = path
        problems.append(Problem(where, f"{name} is one path of multipath disk {mp['name']} "
                                       f"(paths {', '.join(inventory.path_names(mp))}); writing "
                                       f"to one path behind multipathd's back corrupts the "
                                       f"disk: name {mp['name']}, or give its wwn or serial"))
        return None
    if not found:
        left = f" ({excluded} left out)" if excluded else ""
        problems.append(Problem(where, f"no disk matches {_all_hints(disk)}; the machine has "
                                       f"{_disk_list(disks)}{left}{loop_note(disk)}"))
        return None
    if len(found) > 1:
        names = ", ".join(d["name"] for d in found)
        problems.append(Problem(where, f"{len(found)} disks match {_hint_text(hints)} "
                                       f"({names}); add a hint so exactly one does"))
        return None
    dev = found[0]
    if dev["name"] in taken:
        other = taken[dev["name"]]
        problems.append(Problem(where, f"{dev['name']} is already matched by "
                                       f"{other.origin or other.id}"))
        return None
    taken[dev["name"]] = disk
    res.matched_by[disk.id] = _hint_text(hints)
    if picked:
        res.matched_by[disk.id] += f", {picked}"
    if excluded:
        res.matched_by[disk.id] += f" ({excluded} left out)"
    if tie:
        res.matched_by[disk.id] += f", tie broken by {_hint_text(tie[1])}"
        res.warnings.append(f"{where}: {_hint_text(hints)} matches {len(tie[0])} disks "
                            f"({', '.join(d['name'] for d in tie[0])}); "
                            f"{_hint_text(tie[1])} picked {dev['name']}")
    if hints is not disk.hints:
        res.warnings.append(f"{where}: found {dev['name']} by a fallback "
                            f"({_hint_text(hints)}); no disk matched {_hint_text(disk.hints)}")
    res.disks[disk.id] = dev
    res.devices[disk.id] = dev["name"]
    res.sizes[disk.id] = dev["size"]
    res.partition_bases[disk.id] = partition_base(dev)
    res.block_sizes[disk.id] = inventory.block_sizes(dev)
    return dev


def _place(disk, dev, res, problems):
    """disk's partitions (or an array's: dev its device and estimated size) placed."""
    explicit = validate_kept.explicit(disk.partitions)
    if sum(p.size.remaining for p in disk.partitions) > 1 and not explicit:
        return      # validation reports it; there is no single way to place them
    logical, physical, _ = res.block_sizes[disk.id]
    placer = geometry_explicit.place if explicit else geometry.place
    placed, errs = placer(dev["name"], dev["size"], disk.table, disk.partitions,
                          partitions_of=res.partition_bases[disk.id], sector=logical,
                          physical=physical)
    problems += [e if isinstance(e, Problem) else Problem(disk.origin or disk.id, e)
                 for e in errs]
    res.placed[disk.id] = placed
    for p in placed:
        if p.part_id:
            res.devices[p.part_id] = p.device
            res.sizes[p.part_id] = p.size


def _size_arrays(layout, res, problems):
    for r in layout.raids:
        res.devices[r.id] = md_device(r.name)
        member_sizes = [res.sizes[m] for m in r.members if m in res.sizes]
        if len(member_sizes) == len(r.members) and member_sizes:
            res.sizes[r.id] = md_size(r.level, member_sizes)
            small = [s for s in r.spares if s in res.sizes and res.sizes[s] < min(member_sizes)]
            for s in small:
                problems.append(Problem(r.origin or r.id,
                                        f"spare {s!r} is smaller than the smallest member"))


def _place_on_arrays(layout, res, problems):
    """An array's partitions, placed as on a disk of its estimated size (never more than mdadm
    leaves) and of the largest of its members' block sizes."""
    disk_of = {p.id: d.id for d in layout.disks for p in d.partitions}
    for r in (r for r in layout.raids if r.partitions and r.id in res.sizes):
        sizes = [res.block_sizes[disk_of.get(m, m)] for m in r.members + r.spares
                 if disk_of.get(m, m) in res.block_sizes]
        res.block_sizes[r.id] = (max(s[0] for s in sizes), max(s[1] for s in sizes),
                                 all(s[2] for s in sizes))
        res.partition_bases[r.id] = res.devices[r.id]
        _place(r, {"name": res.devices[r.id], "size": res.sizes[r.id]}, res, problems)


def _size_volume_groups(layout, res, problems):
    for vg in layout.volume_groups:
        pv_sizes = [res.sizes.get(pv) for pv in vg.pvs]
        if None in pv_sizes:
            continue    # a disk did not resolve; that is already reported
        extents = sum(max(0, (s - PV_DATA_OFFSET) // EXTENT) for s in pv_sizes)
        res.vg_extents[vg.id] = extents
        res.sizes[vg.id] = extents * EXTENT
        problems += _place_lvs(vg, extents, res)


def _without_excluded(disks, disk):
    """(the disks none of disk.exclude's hint sets match, "NAME: exclude[i], ..." or "")."""
    out = {}
    for i, hints in enumerate(disk.exclude):
        for d in inventory.match(disks, hints):
            out.setdefault(d["name"], f"exclude[{i}]")
    return ([d for d in disks if d["name"] not in out],
            ", ".join(f"{name}: {why}" for name, why in out.items()))


def _rule_found(found):
    """(found, what was left out) for hints that name no disk (size, model, rotational: a
    rule): a read-only or removable disk is no install target that a rule may find."""
    left = [f"{d['name']} {inventory.left_alone(d)}" for d in found if inventory.left_alone(d)]
    if not left:
        return found, None
    return [d for d in found if not inventory.left_alone(d)], "left out: " + "; ".join(left)


def _smallest(found):
    """([the smallest disk], why) of the disks hints found, leaving out those no program picks
    by itself (read-only, removable): Ironic's rule for a root disk without root device hints
    (ironic-python-agent's guess_root_disk sorts by size, then by name, so that firmware that
    boots only the first disk finds it). ([], what was left out) when none is left.
    Where we differ: ironic-python-agent would pick a removable disk, a USB stick smaller than
    the machine's disks first of all (docs/ironic-format.md)."""
    left = [f"{d['name']} {inventory.left_alone(d)}" for d in found if inventory.left_alone(d)]
    usable = sorted((d for d in found if not inventory.left_alone(d)),
                    key=lambda d: (d["size"], d["name"]))
    if not usable:
        return [], "; ".join(left)
    why = (f"the smallest of {len(usable)} ({_disk_list(usable)}), as Ironic picks a root disk "
           "without root device hints")
    if left:
        why += f"; left out: {'; '.join(left)}"
    return usable[:1], why


def _find(disks, disk):
    """(the hints that found disks, the disks, None or (the disks they found, the hint set that
    picked one of them)). The fallbacks are tried in order until one finds a disk; when the
    hints that did found several, the later sets break the tie: fuel-agent picked by name when
    udev gave two NVMe disks one by-id link."""
    sets = [disk.hints] + list(disk.fallback_hints)
    for k, hints in enumerate(sets):
        found = inventory.match(disks, hints)
        if found:
            break
    if len(found) > 1:
        for alt in sets[k + 1:]:
            picked = inventory.match(found, alt)
            if len(picked) == 1:
                return hints, picked, (found, alt)
    return hints, found, None


def _place_lvs(vg, extents, res):
    problems = []
    used = 0
    for lv in vg.logical_volumes:
        res.devices[lv.id] = lv_device(vg.name, lv.name)
        if lv.size.remaining:
            res.lv_sizes[lv.id] = (None, "100%FREE")
            continue
        if lv.size.percent:
            n = int(extents * lv.size.percent / 100)
            res.lv_sizes[lv.id] = (None, f"{lv.size.percent:g}%VG")
        else:
            n = align_up(lv.size.bytes, EXTENT) // EXTENT
            res.lv_sizes[lv.id] = (n * EXTENT, None)
        res.sizes[lv.id] = n * EXTENT
        used += n
    if used > extents:
        problems.append(Problem(vg.origin or vg.id,
                                f"logical volumes need {human(used * EXTENT)} but volume group "
                                f"{vg.name} has about {human(extents * EXTENT)}"))
    rest = extents - used
    for lv in vg.logical_volumes:
        if lv.size.remaining:
            if rest < 1 and used <= extents:
                problems.append(Problem(lv.origin or lv.id,
                                        f"no space left in {vg.name} for 'remaining'"))
            res.sizes[lv.id] = max(0, rest) * EXTENT
    return problems


def _all_hints(disk):
    return " or ".join(_hint_text(h) for h in [disk.hints] + disk.fallback_hints)


def _hint_text(hints):
    return ", ".join(f"{k}={v!r}" for k, v in sorted(hints.items()))


def _disk_list(disks):
    if not disks:
        return "no disks"
    return "; ".join(f"{d['name']} ({human(d['size'])}"
                     + (f", serial {d['serial']}" if d.get("serial") else "") + ")"
                     for d in disks)
