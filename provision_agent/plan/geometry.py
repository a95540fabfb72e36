"""Partition placement on one disk: exact sector ranges with 1 MiB alignment.

Partitions are laid out in input order. Fixed sizes round up to whole MiB, percentages are of
the disk's usable space rounded down to whole MiB, and a single "remaining" partition takes what
is left. GPT keeps the last 34 sectors for its backup; msdos needs an extended partition beyond
four partitions, and every logical partition is preceded by 1 MiB that holds its EBR.
"""

from dataclasses import dataclass

from provision_agent.plan.devnames import partition_device
from provision_agent.plan.units import MiB, align_down, align_up, human

SECTOR = 512
ALIGN = MiB // SECTOR                 # sectors per MiB
GPT_BACKUP_SECTORS = 34               # backup header + 32 sectors of entries + protective slack
MSDOS_MAX_SECTOR = 2 ** 32 - 1        # msdos addresses 32-bit LBAs


@dataclass
class Placed:
    part_id: str
    number: int
    device: str
    start: int                        # first sector
    end: int                          # last sector, inclusive
    kind: str | None                  # primary | extended | logical for msdos, None for gpt

    @property
    def size(self):
        return (self.end - self.start + 1) * SECTOR


def usable_range(disk_bytes, table):
    """(first, end_exclusive) sectors partitions may occupy, both MiB-aligned."""
    total = disk_bytes // SECTOR
    last = total - GPT_BACKUP_SECTORS - 1 if table == "gpt" else total - 1
    return ALIGN, align_down(last + 1, ALIGN)


def place(disk_name, disk_bytes, table, partitions, partitions_of=None):
    """Place `partitions` (model.Partition) on a disk. Returns (placed list, problems list of str).

    The placed list also holds the msdos extended container (part_id None) when one is needed.
    Partition devices are named after partitions_of (a multipath disk's map link) or the disk.
    """
    base = partitions_of or disk_name
    first, end = usable_range(disk_bytes, table)
    usable = max(0, (end - first) * SECTOR)
    logical = table == "msdos" and len(partitions) > 4
    overhead = (len(partitions) - 3) * MiB if logical else 0
    sizes = []
    for p in partitions:
        if p.size.remaining:
            sizes.append(None)
        else:
            sizes.append(max(MiB, align_up(p.size.resolve(usable), MiB)) if p.size.is_fixed
                         else max(MiB, align_down(p.size.resolve(usable), MiB)))
    fixed_total = sum(s for s in sizes if s is not None) + overhead
    problems = []
    if fixed_total > usable:
        problems.append(f"partitions need {human(fixed_total)} but {disk_name} has "
                        f"{human(usable)} usable ({human(disk_bytes)} in all)")
        return [], problems
    if None in sizes:
        rest = align_down(usable - fixed_total, MiB)
        if rest < MiB:
            problems.append(f"no space left for the 'remaining' partition on {disk_name}")
            return [], problems
        sizes[sizes.index(None)] = rest

    placed = []
    cursor = first
    for i, (p, size) in enumerate(zip(partitions, sizes)):
        if logical and i == 3:
            placed.append(Placed(None, 4, partition_device(base, 4), cursor, end - 1,
                                 "extended"))
        if logical and i >= 3:
            cursor += ALIGN                     # room for this logical partition's EBR
            number, kind = i + 2, "logical"
        else:
            number, kind = i + 1, ("primary" if table == "msdos" else None)
        sectors = size // SECTOR
        placed.append(Placed(p.id, number, partition_device(base, number), cursor,
                             cursor + sectors - 1, kind))
        cursor += sectors
    if table == "msdos" and placed and placed[-1].end > MSDOS_MAX_SECTOR:
        problems.append(f"an msdos table cannot address beyond 2TiB; {disk_name} would need "
                        f"{human((placed[-1].end + 1) * SECTOR)}: use a gpt table")
    return placed, problems
