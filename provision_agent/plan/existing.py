"""Partitions kept if the disk holds them (`"keep": "if_present"`, Ironic's preserve_ephemeral):
whether each is kept, and where, is read from the disk's partition table.

The table comes with the disk's inventory entry as `partition_table`, in the form of
`sfdisk --json` ({"label", "sectorsize", "partitions": [{"node", "start", "size", ...}]},
start and size in logical sectors), or null for a disk that has none. The live machine's is read
before planning (cli/main.py); a recorded inventory may carry it.

- No table, or no partition of the planned number: a first deploy, the partition is created.
- A partition of that number and of the planned size: kept at the place the table gives it
  (not recomputed), and everything else the plan places must stay clear of it.
- A partition of that number and another size, or in the way of the others: refused (exit 3)
  before anything is written, saying what the disk holds.
- No table known (a recorded inventory without one): planned as kept where the layout places
  it, with a warning; the run reads the disk and decides.
"""

from provision_agent.errors import Problem
from provision_agent.plan import geometry
from provision_agent.plan.devnames import partition_number
from provision_agent.plan.units import align_up, human

UNKNOWN = object()


def needed(layout):
    """Whether planning this layout reads the disks' partition tables."""
    return any(p.keep_if_present for _, p in layout.partitions())


def decide(res):
    """Set `keep` on every keep_if_present partition of res.layout from its disk's table and
    move it to the table's place; returns the problems (MachineMismatch)."""
    problems = []
    for disk in res.layout.disks:
        wanted = {p.id: p for p in disk.partitions if p.keep_if_present}
        if not wanted or disk.id not in res.disks:
            continue
        table = res.disks[disk.id].get("partition_table", UNKNOWN)
        placed = res.placed.get(disk.id, [])
        for i, slot in enumerate(placed):
            part = wanted.get(slot.part_id)
            if part is not None:
                problems += _decide_one(res, disk, part, placed, i, table)
    return problems


def _span(slot):
    """(first byte, byte after) of a placed partition."""
    return slot.offset, slot.end


def _found(table, number, sector):
    """(first byte, byte after) of partition `number` in an sfdisk table, or None. sfdisk
    counts in the disk's logical sectors (its "sectorsize"; the disk's own when it says
    none)."""
    sector = table.get("sectorsize", sector)
    for p in table.get("partitions") or []:
        if not isinstance(p, dict) or not str(p.get("node", ""))[-1:].isdigit():
            continue
        if partition_number(str(p["node"])) == number:
            start, size = p.get("start"), p.get("size")
            if not all(isinstance(v, int) and v >= 0 for v in (start, size, sector)):
                return None
            return start * sector, (start + size) * sector
    return None


def _decide_one(res, disk, part, placed, i, table):
    slot, name = placed[i], res.devices[disk.id]
    where = part.origin or part.id
    if table is UNKNOWN:
        part.keep = True
        res.warnings.append(
            f"{where}: kept if {name} holds it; the inventory records no partition table for "
            f"{name}, so this plan assumes partition {slot.number} kept where the layout places "
            f"it. The run reads the disk: there it is kept where the table has it, created on a "
            f"disk without it, and the run refused if partition {slot.number} is another size")
        return []
    sector = res.block_sizes[disk.id][0]
    found = _found(table, slot.number, sector) if isinstance(table, dict) else None
    if found is None:
        part.keep = False
        missing = f"partition {slot.number}" if table else "partition table"
        res.warnings.append(f"{where}: {name} has no {missing} to keep (a first deploy): "
                            f"partition {slot.number} is created")
        return []
    start, end = found
    want_start, want_end = _span(slot)
    if end - start != want_end - want_start:
        return [Problem(where, f"partition {slot.number} of {name}, to be kept, is "
                               f"{human(end - start)} at bytes {start}-{end - 1}; the request "
                               f"is {human(want_end - want_start)}: it is not the partition "
                               f"asked for. Deploy without keeping it (its data is then "
                               f"destroyed), or with the size it has")]
    if start % sector or end % sector:
        return [Problem(where, f"partition {slot.number} of {name}, to be kept, is at bytes "
                               f"{start}-{end - 1}, not in whole {sector}-byte sectors")]
    problems = _make_room(res, disk, placed, i, start, end, where)
    if problems:
        return problems
    part.keep = True
    return []


def _usable_end(res, disk):
    """The byte after the last one a partition of disk may use."""
    logical, physical, _ = res.block_sizes[disk.id]
    return geometry.usable_range(res.sizes[disk.id], disk.table, logical, physical)[1]


def _align(res, disk):
    logical, physical, _ = res.block_sizes[disk.id]
    return geometry.alignment(logical, physical)


def _move(slot, start, end):
    slot.offset, slot.size = start, end - start


def _make_room(res, disk, placed, i, start, end, where):
    """Put placed[i] at bytes [start, end) as the disk has it; the partitions planned before it
    must end by then, those after it move up behind it (the one sized by what remains
    shrinking instead), and all must still fit the disk. Problems if they cannot."""
    name, slot = res.devices[disk.id], placed[i]

    def clash(other, o_start, o_end):
        return [Problem(where, f"partition {slot.number} of {name}, to be kept, is at bytes "
                               f"{start}-{end - 1}, where the layout puts partition "
                               f"{other.number} ({other.part_id or other.kind}, bytes "
                               f"{o_start}-{o_end - 1}): the layout around it does not fit "
                               f"the disk's table")]

    for other in placed[:i]:
        o_start, o_end = _span(other)
        if o_end > start and other.kind != "extended":
            return clash(other, o_start, o_end)
    after = placed[i + 1:]
    if any(o.kind in ("extended", "logical") for o in after + [slot]):
        # msdos logical partitions: moving them moves their EBRs; only an unchanged place
        for other in placed:
            o_start, o_end = _span(other)
            if other is not slot and other.kind != "extended" and o_start < end \
                    and start < o_end:
                return clash(other, o_start, o_end)
        _move(slot, start, end)
        return []
    _move(slot, start, end)
    shift = max(0, align_up(end, _align(res, disk)) - _span(after[0])[0]) if after else 0
    sizes = {p.id: p.size for p in disk.partitions}
    for other in after:
        o_start, o_end = _span(other)
        if not shift:
            break
        if sizes[other.part_id].remaining:
            if o_end - o_start - shift < _align(res, disk):
                return clash(other, o_start, o_end)
            _move(other, o_start + shift, o_end)      # what remains: less of it
            res.sizes[other.part_id] = o_end - o_start - shift
            shift = 0
        else:
            _move(other, o_start + shift, o_end + shift)
    if shift and _span(after[-1])[1] > _usable_end(res, disk):
        return [Problem(where, f"partition {slot.number} of {name}, to be kept, is at bytes "
                               f"{start}-{end - 1}; behind it the layout's other partitions "
                               f"need {human(_span(after[-1])[1] - _usable_end(res, disk))} "
                               f"more than {name} has")]
    return []
