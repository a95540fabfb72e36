"""Checks of what a layout keeps and of partitions placed explicitly, before anything is
written (exit 2, each problem at the entry that causes it).

Keeping has two parts: a partition's place (its number, first byte and size in the table) and
its contents. `keep` keeps both; `wipe` ("superblock" or "zero") gives up the contents while
the place stays, so that what the layout puts there is made anew (a filesystem, a physical
volume of a new volume group, a member of a new array). Nothing may write into contents that
are kept: an array, a volume group, encryption or an image made on them is refused, and what
is kept must stand on kept things (a kept volume group on kept partitions or arrays, a kept
array on kept partitions or whole disks that are not wiped).
"""

from provision_agent.errors import Problem

WIPES = ("superblock", "zero")


def _where(obj):
    return obj.origin or getattr(obj, "id", "?")


def explicit(partitions):
    """Whether a disk's partitions say where they go (a number, an offset or an msdos
    extended partition): they are then placed as written (geometry_explicit.py)."""
    return any(p.number is not None or p.offset is not None or p.type == "extended"
               for p in partitions)


def check(layout):
    problems = []
    add = lambda obj, msg: problems.append(Problem(_where(obj), msg))  # noqa: E731
    for disk in layout.disks + [x for x in layout.raids + layout.bcache if x.partitions]:
        _check_placement(disk, add)
    _check_array_partitions(layout, add)
    parts = {p.id: p for _, p in layout.partitions()}
    _check_extended_unused(layout, parts, add)
    contents = _kept_contents(layout, parts)
    _check_arrays(layout, parts, contents, add)
    _check_volume_groups(layout, parts, contents, add)
    _check_writers(layout, contents, add)
    return problems


def _kept_contents(layout, parts):
    """Ids whose contents stay: partitions kept (or kept if present) and arrays kept, neither
    wiped, and the logical volumes of kept volume groups."""
    kept = {pid for pid, p in parts.items() if (p.keep or p.keep_if_present) and not p.wipe}
    kept |= {r.id for r in layout.raids if r.keep and not r.wipe and not r.partitions}
    return kept | {lv.id for vg, lv in layout.logical_volumes() if vg.keep}


def _check_array_partitions(layout, add):
    """Partitions on an array: its table is edited around the kept ones as a disk's is, so the
    array must be kept (assembled, not created) and not wiped; firmware reads no array's
    table, and what a disk's table holds is read from disks only."""
    for r in layout.raids:
        kept = [p for p in r.partitions if p.keep or p.keep_if_present]
        if kept and (not r.keep or r.wipe):
            add(kept[0], f"a partition of array {r.id!r} is kept, so the array must be kept "
                         f"too (keep: true, no wipe): a new or wiped array has no table to "
                         f"keep it in")
        for p in r.partitions:
            if p.type in ("bios_grub", "esp"):
                add(p, f"a {p.type} partition on an md array: firmware reads the partition "
                       f"tables of disks, not of arrays")
            if p.keep_if_present:
                add(p, "keep \"if_present\" reads a disk's table; on an array say true or "
                       "false")


def _check_placement(disk, add):
    extended = [p for p in disk.partitions if p.type == "extended"]
    for p in disk.partitions:
        if p.offset is not None and not p.offset.is_fixed:
            add(p, "offset is where the partition starts: give bytes (an integer is MiB, or a "
                   "size with a unit), not a percentage or remaining")
        if p.type == "extended" and disk.table != "msdos":
            add(p, "an extended partition exists only in msdos tables")
        if p.type == "extended" and p.wipe:
            add(p, "an extended partition holds the logical partitions, no contents of its "
                   "own to wipe; wipe the logical ones")
        if p.number is not None and disk.table == "msdos" and p.number > 4 and not extended:
            add(p, f"number {p.number}: msdos numbers 5 and up are logical partitions, which "
                   f"need an extended partition (type extended) listed before them")
    if len(extended) > 1:
        add(extended[1], "an msdos table holds one extended partition")
    if not explicit(disk.partitions):
        return
    numbers = {}
    for p in disk.partitions:
        if p.number is not None:
            if p.number in numbers:
                add(p, f"number {p.number} is also given to {_where(numbers[p.number])}")
            numbers[p.number] = p
        if p.keep_if_present:
            add(p, "keep \"if_present\" keeps the partition where the disk's table has it; on "
                   "a disk whose partitions give number or offset the layout says where: "
                   "use keep true")
    remaining = [p for p in disk.partitions if p.size.remaining]
    for p in remaining:
        if not _last_of_its_kind(disk, p):
            add(p, "with partitions placed by number or offset, \"remaining\" is for the last "
                   "partition (and the last logical one, which fills its extended partition), "
                   "or one followed only by partitions of fixed size without an offset")
    if extended:
        _check_kept_logicals(disk, extended[0], add)


def _last_of_its_kind(disk, part):
    """Last partition of the disk; or the extended one, or the last logical one, with only
    logical partitions behind it (listed after the extended one, not numbered 1 to 4)."""
    parts = disk.partitions
    i = parts.index(part)
    ext = next((k for k, p in enumerate(parts) if p.type == "extended"), None)
    later = parts[i + 1:]

    def logical(p):
        return p.number is None or p.number > 4

    def behind(p):
        """Placed behind it, in the room it leaves."""
        return p.offset is None and p.size.is_fixed

    if ext is None or i < ext:
        return all(behind(p) for p in later)
    if i == ext:
        return all(logical(p) for p in later)
    return not any(logical(p) and not behind(p) for p in later)


def _check_kept_logicals(disk, extended, add):
    """Deleting an extended partition deletes the logical ones inside it."""
    after = disk.partitions[disk.partitions.index(extended) + 1:]
    for p in after:
        if (p.number is None or p.number > 4) and p.keep and not extended.keep:
            add(p, f"this logical partition is kept, so the extended partition "
                   f"{extended.id!r} that holds it must be kept too (keep: true)")


def _check_extended_unused(layout, parts, add):
    """An extended partition is the container of the logical ones, not a device."""
    ext = {pid for pid, p in parts.items() if p.type == "extended"}
    if not ext:
        return
    users = [(r, r.members + r.spares) for r in layout.raids]
    users += [(vg, vg.pvs) for vg in layout.volume_groups]
    users += [(fs, [fs.device]) for fs in layout.filesystems]
    users += [(e, [e.device]) for e in layout.encrypted]
    users += [(im, [im.target]) for im in layout.images]
    if layout.configdrive and layout.configdrive.partition:
        users.append((layout.configdrive, [layout.configdrive.partition]))
    for obj, refs in users:
        for ref in sorted(set(refs) & ext):
            add(obj, f"{ref!r} is an extended partition: it holds the logical partitions and "
                     f"nothing else can use it")


def _check_arrays(layout, parts, contents, add):
    whole = {d.id: d for d in layout.disks if not d.partitions}
    for r in layout.raids:
        refs = r.members + r.spares
        if r.keep:
            for ref in refs:
                part, disk = parts.get(ref), whole.get(ref)
                if part is not None and part.keep and not part.wipe:
                    continue
                if disk is not None and not disk.wipe:
                    continue
                add(r, f"the array is kept, so its member {ref!r} must be a kept partition "
                       f"(keep: true, no wipe) or a whole disk with wipe: false; anything else "
                       f"is wiped or re-created before the array is assembled")
            continue
        for ref in sorted(set(refs) & contents):
            add(r, f"partition {ref!r} is kept with its contents, so it cannot become a member "
                   f"of a new array: keep the array too (if it is one already), or give the "
                   f"partition wipe (\"superblock\") to use its place anew")


def _check_volume_groups(layout, parts, contents, add):
    raids = {r.id: r for r in layout.raids}
    for vg in layout.volume_groups:
        if vg.keep:
            for ref in vg.pvs:
                part, raid = parts.get(ref), raids.get(ref)
                if (part is not None and part.keep and not part.wipe) or \
                        (raid is not None and raid.keep and not raid.wipe):
                    continue
                add(vg, f"the volume group is kept, so its physical volume {ref!r} must be a "
                        f"kept partition (keep: true) or a kept array, neither wiped; anything "
                        f"else is wiped or re-created before the volume group is activated")
            continue
        for ref in sorted(set(vg.pvs) & contents):
            add(vg, f"{ref!r} is kept with its contents, so it cannot become a physical volume "
                    f"of a new volume group: keep the volume group too (if it is one already), "
                    f"or give it wipe (\"superblock\") to use its place anew")


def _check_writers(layout, contents, add):
    for im in layout.images:
        if im.target in contents:
            add(im, f"{im.target!r} is kept with its contents, so no image can be written to "
                    f"it (give it wipe to use its place anew)")
    for e in layout.encrypted:
        if e.device in contents:
            add(e, f"{e.device!r} is kept with its contents, so it cannot be encrypted (the "
                   f"LUKS header would overwrite them)")
