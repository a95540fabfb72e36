"""Partition placement on one disk, in bytes, for the disk's own sector sizes.

Partitions are laid out in input order. Fixed sizes round up to the alignment, percentages are
of the disk's usable space rounded down to it, and a single "remaining" partition takes what
is left. The alignment is 1 MiB, or a multiple of it that is also one of the disk's logical
and physical block sizes. Every offset and size is in bytes: the partitions driver writes
them in the disk's own logical sectors (512 or 4096 bytes), which the tools count in.

GPT keeps its primary header and 16 KiB of entries at the start and their backup at the end,
whole logical sectors each: 34 sectors (17 KiB) at the start and 33 at the end at 512 bytes,
6 (24 KiB) and 5 (20 KiB) at 4096. msdos addresses 2^32 logical sectors (2 TiB at 512 bytes,
16 TiB at 4096: a partition beyond is refused), needs an extended partition beyond four
partitions, and every logical partition is preceded by one alignment unit that holds its EBR.
"""

import math
from dataclasses import dataclass

from provision_agent.plan.devnames import partition_device
from provision_agent.plan.units import MiB, align_down, align_up, human

DEFAULT_SECTOR = 512                  # an inventory that records no block sizes
SECTOR_SIZES = (512, 1024, 2048, 4096)
GPT_ENTRIES_BYTES = 128 * 128         # 128 entries of 128 bytes, what every tool writes
MSDOS_MAX_SECTORS = 2 ** 32           # msdos start and size fields are 32-bit LBAs


def gpt_entries_sectors(sector):
    return -(-GPT_ENTRIES_BYTES // sector)


def gpt_head_bytes(sector):
    """The protective MBR (LBA 0), the header (LBA 1) and the entries."""
    return (2 + gpt_entries_sectors(sector)) * sector


def gpt_tail_bytes(sector):
    """The backup entries and the backup header in the disk's last sector."""
    return (1 + gpt_entries_sectors(sector)) * sector


def alignment(logical=DEFAULT_SECTOR, physical=None):
    """Bytes every partition starts and ends on: 1 MiB, or the least multiple of it that is
    also a multiple of the logical and physical block sizes."""
    return math.lcm(MiB, logical, physical or logical)


@dataclass
class Placed:
    part_id: str
    number: int
    device: str
    offset: int                       # first byte
    size: int                         # bytes
    kind: str | None                  # primary | extended | logical for msdos, None for gpt

    @property
    def end(self):
        """The byte after the partition."""
        return self.offset + self.size


def usable_range(disk_bytes, table, sector=DEFAULT_SECTOR, physical=None):
    """(first, end_exclusive) bytes partitions may occupy, both aligned."""
    align = alignment(sector, physical)
    disk_bytes = align_down(disk_bytes, sector)
    if table == "gpt":
        head, last = gpt_head_bytes(sector), disk_bytes - gpt_tail_bytes(sector)
    else:
        head, last = sector, disk_bytes
    return align_up(max(head, align), align), align_down(last, align)


def place(disk_name, disk_bytes, table, partitions, partitions_of=None,
          sector=DEFAULT_SECTOR, physical=None):
    """Place `partitions` (model.Partition) on a disk of logical block size `sector` and
    physical block size `physical`. Returns (placed list, problems list of str).

    The placed list also holds the msdos extended container (part_id None) when one is needed.
    Partition devices are named after partitions_of (a multipath disk's map link) or the disk.
    """
    if sector not in SECTOR_SIZES or (physical and physical % sector):
        return [], [f"{disk_name} reports a logical block size of {sector} and a physical one "
                    f"of {physical}: partition tables are written for logical sizes of "
                    f"{', '.join(map(str, SECTOR_SIZES))} bytes"]
    base = partitions_of or disk_name
    align = alignment(sector, physical)
    first, end = usable_range(disk_bytes, table, sector, physical)
    usable = max(0, end - first)
    logical = table == "msdos" and len(partitions) > 4
    overhead = (len(partitions) - 3) * align if logical else 0
    sizes = []
    for p in partitions:
        if p.size.remaining:
            sizes.append(None)
        else:
            sizes.append(max(align, align_up(p.size.resolve(usable), align)) if p.size.is_fixed
                         else max(align, align_down(p.size.resolve(usable), align)))
    fixed_total = sum(s for s in sizes if s is not None) + overhead
    problems = []
    if fixed_total > usable:
        problems.append(f"partitions need {human(fixed_total)} but {disk_name} has "
                        f"{human(usable)} usable ({human(disk_bytes)} in all)")
        return [], problems
    if None in sizes:
        rest = align_down(usable - fixed_total, align)
        if rest < align:
            problems.append(f"no space left for the 'remaining' partition on {disk_name}")
            return [], problems
        sizes[sizes.index(None)] = rest

    placed = []
    cursor = first
    for i, (p, size) in enumerate(zip(partitions, sizes)):
        if logical and i == 3:
            placed.append(Placed(None, 4, partition_device(base, 4), cursor, end - cursor,
                                 "extended"))
        if logical and i >= 3:
            cursor += align                     # room for this logical partition's EBR
            number, kind = i + 2, "logical"
        else:
            number, kind = i + 1, ("primary" if table == "msdos" else None)
        placed.append(Placed(p.id, number, partition_device(base, number), cursor, size, kind))
        cursor += size
    need = max((p.end for p in placed), default=0)
    if table == "msdos" and need > MSDOS_MAX_SECTORS * sector:
        problems.append(f"an msdos table cannot address beyond "
                        f"{human(MSDOS_MAX_SECTORS * sector)} with {sector}-byte sectors; "
                        f"{disk_name} would need {human(need)}: use a gpt table")
    return placed, problems
