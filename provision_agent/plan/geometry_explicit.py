"""Partitions placed as the layout writes them: by number and first byte, so that a layout can
describe a table that exists (curtin's `number` and `offset`), msdos extended and logical
partitions included.

Used for a disk whose partitions give a `number`, an `offset` or an msdos `extended`
partition (validate_kept.explicit). Partitions lie on the disk in the order listed:
- a partition with `offset` starts there (whole logical sectors, not before the table's first
  usable byte, not inside the partition before it); one without starts behind the one before,
  aligned as in geometry.py (a logical one an alignment unit later, room for its EBR);
- sizes are taken exactly, rounded up to whole logical sectors only (an existing partition
  need not end on a MiB); a percentage is of the usable space, aligned down; `remaining` runs
  to the end of the usable space (or of its extended partition), less the room of the
  partitions listed behind it without an offset (a layout's implied configdrive partition);
- numbers default to one more than the partition before; after an msdos extended partition,
  5 and up: those are logical partitions and must lie inside it. On msdos, numbers 1 to 4 are
  primary (or the extended one).
Problems name the partition's entry.
"""

from provision_agent.errors import Problem
from provision_agent.plan import geometry
from provision_agent.plan.devnames import partition_device
from provision_agent.plan.units import align_down, align_up, human


def place(disk_name, disk_bytes, table, partitions, partitions_of=None,
          sector=geometry.DEFAULT_SECTOR, physical=None):
    """(placed list, problems) as geometry.place, for partitions placed as written."""
    base = partitions_of or disk_name
    align = geometry.alignment(sector, physical)
    first, end = geometry.usable_range(disk_bytes, table, sector, physical)
    state = _State(first, end)
    placed, problems = [], []
    for i, p in enumerate(partitions):
        where = p.origin or p.id
        number, kind = _number(state, p, table)
        if kind == "logical" and state.container is None:
            problems.append(Problem(where, f"number {number} is a logical partition, which "
                                           f"needs an extended partition listed before it"))
            return [], problems
        start, low = _start(state, p, kind, align, sector)
        if start % sector:
            problems.append(Problem(where, f"offset {start} is not a whole number of "
                                           f"{disk_name}'s {sector}-byte sectors"))
            return [], problems
        top = state.container.end if kind == "logical" else end
        room = _behind(partitions, i, kind, align, sector)
        size = _size(p, start, align_down(top - room, align) if room else top, end - first,
                     align, sector)
        if start < low or start + size > top or size <= 0:
            problems.append(Problem(where, _misfit(disk_name, kind, start, size, low, top)))
            return [], problems
        slot = geometry.Placed(p.id, number, partition_device(base, number), start, size,
                               kind)
        placed.append(slot)
        state.advance(slot)
    need = max((p.end for p in placed), default=0)
    if table == "msdos" and need > geometry.MSDOS_MAX_SECTORS * sector:
        problems.append(Problem(disk_name, f"an msdos table cannot address beyond "
                                           f"{human(geometry.MSDOS_MAX_SECTORS * sector)} with "
                                           f"{sector}-byte sectors; {disk_name} would need "
                                           f"{human(need)}"))
    return placed, problems


class _State:
    """Where the partitions placed so far end: the primary ones (and the extended one), and
    the logical ones inside the extended one."""

    def __init__(self, first, end):
        self.primary_end = first
        self.container = None
        self.logical_end = None
        self.last_number = 0
        self.last_logical = 4
        self.after_container = False    # the partition before was the extended or a logical

    def advance(self, slot):
        if slot.kind == "logical":
            self.logical_end = slot.end
            self.last_logical = slot.number
            self.after_container = True
        else:
            self.primary_end = slot.end
            self.after_container = slot.kind == "extended"
            if slot.kind == "extended":
                self.container, self.logical_end = slot, slot.offset
        self.last_number = slot.number


def _number(state, p, table):
    """(number, kind): kind primary | extended | logical on msdos, None on gpt."""
    if table != "msdos":
        return (p.number or state.last_number + 1), None
    if p.type == "extended":
        return (p.number or state.last_number + 1), "extended"
    if p.number is not None:
        return p.number, ("logical" if p.number > 4 else "primary")
    if state.after_container:
        return state.last_logical + 1, "logical"
    return state.last_number + 1, "primary"


def _start(state, p, kind, align, sector):
    """(first byte, the least it may be)."""
    if kind == "logical":
        low = state.logical_end + sector              # its EBR goes in front of it
        auto = align_up(state.logical_end, align) + align
    else:
        low = state.primary_end
        auto = align_up(low, align)
    return (p.offset.bytes if p.offset is not None else auto), low


def _behind(partitions, i, kind, align, sector):
    """Room a `remaining` partition leaves for the ones listed behind it without an offset in
    its part of the disk (the configdrive's partition a layout implies, for one): their sizes,
    each with an alignment unit for where it starts (and a logical one's EBR)."""
    if not partitions[i].size.remaining:
        return 0
    room = 0
    for p in partitions[i + 1:]:
        logical = p.type != "extended" and (p.number is None and kind == "logical"
                                            or (p.number or 0) > 4)
        if p.offset is not None or logical != (kind == "logical"):
            break
        room += align_up(p.size.bytes, sector) + align * (2 if logical else 1)
    return room


def _size(p, start, top, usable, align, sector):
    if p.size.remaining:
        return top - start
    if p.size.percent:
        return max(align, align_down(p.size.resolve(usable), align))
    return align_up(p.size.bytes, sector)


def _misfit(disk_name, kind, start, size, low, top):
    span = f"bytes {start}-{start + size - 1}" if size > 0 else f"byte {start}"
    if kind == "logical" and (start < low or start + size > top):
        return (f"this logical partition at {span} must lie inside its extended partition, "
                f"behind the one before it (from byte {low}, up to byte {top - 1})")
    if start < low:
        return (f"starts at byte {start}, inside the partition before it or the table "
                f"(the first free byte is {low}): list partitions in the order they lie on "
                f"the disk")
    if size <= 0:
        return f"has no room left at {span} on {disk_name}"
    return (f"at {span} runs past the end of {disk_name}'s usable space (byte {top - 1}, "
            f"{human(top)})")
