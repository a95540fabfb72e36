"""Where a failed image's own partition table says its pieces are: what holdback.wipe() zeroes
besides both ends of the target.

Zeroing the first MiB takes the table away, but not the partitions it named: an ext4 at 1 MiB
stays whole one byte after it, and gdisk rebuilds the table from a GPT backup header at the
image's end (where the image's own header says it is, not necessarily where the write ended).
So the table, read from the held-back first MiB (holdback.Held) and, for what lies beyond it,
from the target, names what else is zeroed: the first and last MiB of each partition (the
superblocks blkid probes, a LUKS header, md's and ZFS's labels at the end), each GPT header
(the backup, and the entries it names: a backup naming other partitions than the primary
would be what gdisk recovers), and the EBR chain of an MBR's extended partition with its
logical partitions.

The table is an attacker's as much as the image is: nothing is trusted to be consistent, no
CRC is checked (a recovery tool would still use a table whose CRC fails), every read is
bounded (MAX_ENTRIES GPT entries, MAX_LOGICAL EBRs, each followed once), and a range outside
the target is dropped. Table LBAs are tried as 512- and 4096-byte sectors: the image may have
been made for either and the target's kernel reads it in its own.

The layouts are the UEFI specification's (GPT header and entries) and the PC's MBR and EBR.
"""

import struct

SECTORS = (512, 4096)
MBR_SIGNATURE = b"\x55\xaa"
GPT_SIGNATURE = b"EFI PART"
MBR_PROTECTIVE = 0xEE                   # GPT's MBR entry: the GPT itself is read
MBR_EXTENDED = {0x05, 0x0F, 0x85}       # CHS, LBA and Linux extended: an EBR chain
MAX_LOGICAL = 128                       # EBRs followed (the kernel stops far sooner)
MAX_ENTRIES = 1024                      # GPT entries read (the kernel sees 256 partitions)
MAX_ENTRY_SIZE = 4096


def ranges(read, size, span):
    """Sorted, merged (start, length) byte ranges of a target of size bytes to zero, from the
    table at the image's start. read(offset, n): up to n bytes of the image as it lies on the
    target (b'' past its end). span: how much of each partition's start and end."""
    found = []
    for sector in SECTORS:
        found += _gpt(read, size, span, sector)
        found += _mbr(read, size, span, sector)
    return merge(found, size)


def merge(found, size):
    """The (start, length) ranges cut to [0, size), sorted, overlapping ones joined."""
    cut = sorted((max(0, start), min(size, start + length)) for start, length in found
                 if length > 0 and start < size and start + length > 0)
    merged = []
    for start, end in cut:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end - start) for start, end in merged]


def _partition(first, end, span):
    """A partition's first and last span bytes (its whole, when it is smaller)."""
    return [(first, min(span, end - first)), (max(first, end - span), min(span, end - first))]


def _gpt(read, size, span, sector):
    """The GPT headers at LBA 1 and at the LBA it names as its backup, their entries' ranges."""
    found, seen, lbas = [], set(), [1]
    while lbas:
        lba = lbas.pop()
        if lba in seen or lba * sector >= size:
            continue
        seen.add(lba)
        header = read(lba * sector, 92)
        if len(header) < 92 or header[:8] != GPT_SIGNATURE:
            continue
        alternate, = struct.unpack_from("<Q", header, 32)
        # each header's sector and what precedes it (a backup's entries), up to span bytes;
        # the alternate's even when it holds no header yet
        for at in (lba, alternate):
            found.append((at * sector + sector - span, span))
        entries_lba, count, entry_size = struct.unpack_from("<QII", header, 72)
        lbas.append(alternate)
        found += _gpt_entries(read, size, span, sector, entries_lba, count, entry_size)
    return found


def _gpt_entries(read, size, span, sector, lba, count, entry_size):
    if not 128 <= entry_size <= MAX_ENTRY_SIZE or lba * sector >= size:
        return []
    count = min(count, MAX_ENTRIES)
    table = read(lba * sector, count * entry_size)
    found = [(lba * sector, len(table))]
    for at in range(0, len(table) - entry_size + 1, entry_size):
        if table[at:at + 16] == bytes(16):      # an unused entry: no type
            continue
        first, last = struct.unpack_from("<QQ", table, at + 32)
        if first <= last and first * sector < size:
            found += _partition(first * sector, (last + 1) * sector, span)
    return found


def _mbr(read, size, span, sector):
    """An MBR's partitions, and the logical ones its extended partition's EBR chain names."""
    found = []
    for kind, start, count in _mbr_entries(read(0, 512)):
        if kind == MBR_PROTECTIVE:
            continue
        found += _partition(start * sector, (start + count) * sector, span)
        if kind in MBR_EXTENDED:
            found += _logical(read, size, span, sector, start)
    return found


def _mbr_entries(block):
    """(type, first LBA, sectors) of a boot record's used entries; none without its signature."""
    if len(block) < 512 or block[510:512] != MBR_SIGNATURE:
        return []
    entries = [struct.unpack_from("<4xB3xII", block, 446 + 16 * i) for i in range(4)]
    return [(kind, start, count) for kind, start, count in entries if kind and count]


def _logical(read, size, span, sector, extended):
    """Each EBR of the chain from the extended partition's start: its sector and its logical
    partition (an entry counted from the EBR); an extended entry links the next EBR (counted
    from the extended partition's start)."""
    found, seen, ebr = [], set(), extended
    while ebr not in seen and len(seen) < MAX_LOGICAL and ebr * sector < size:
        seen.add(ebr)
        entries = _mbr_entries(read(ebr * sector, 512))
        if not entries:
            break
        found.append((ebr * sector, sector))
        links = []
        for kind, start, count in entries:
            if kind in MBR_EXTENDED:
                links.append(start)
            else:
                found += _partition((ebr + start) * sector, (ebr + start + count) * sector,
                                    span)
        if not links:
            break
        ebr = extended + links[0]
    return found
