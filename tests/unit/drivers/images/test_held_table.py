"""held_table: what a failed image's own table names for the wipe, from hand-made tables (real
ones written by sgdisk and sfdisk onto loop devices: tests/functional/test_failed_disk_loop.py),
and tables an attacker made: loops, absurd counts and offsets, random bytes."""

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from provision_agent.drivers.images import held_table

MiB = 1 << 20
SIZE = 64 * MiB
LINUX = bytes.fromhex("af3dc60f838472478e793d69d8477de4")


def image(size=SIZE):
    return bytearray(size)


def reader(img):
    def read(offset, n):
        return bytes(img[offset:offset + n])
    return read


def ranges(img, size=SIZE):
    return held_table.ranges(reader(img), size, MiB)


def covers(found, start, length=1):
    return any(s <= start and start + length <= s + n for s, n in found)


def gpt_header(img, lba, alternate, entries_lba, parts, sector=512, count=128):
    at = lba * sector
    img[at:at + 8] = b"EFI PART"
    struct.pack_into("<QQ", img, at + 24, lba, alternate)
    struct.pack_into("<QII", img, at + 72, entries_lba, count, 128)
    for i, (first, last) in enumerate(parts):
        e = entries_lba * sector + 128 * i
        img[e:e + 16] = LINUX
        struct.pack_into("<QQ", img, e + 32, first, last)


def mbr(img, at, entries):
    for i, (kind, start, count) in enumerate(entries):
        struct.pack_into("<4xB3xII", img, at + 446 + 16 * i, kind, start, count)
    img[at + 510:at + 512] = b"\x55\xaa"


def test_each_gpt_partitions_start_and_end_and_the_backup_where_the_header_says():
    img = image()
    mbr(img, 0, [(0xEE, 1, SIZE // 512 - 1)])
    backup = 32 * MiB // 512 - 1          # an image made for 32 MiB, on a larger disk
    gpt_header(img, 1, backup, 2, [(2048, 34815), (34816, 65502)])
    found = ranges(img)
    assert covers(found, 0, 34 * 512)                   # the table itself (headers, entries)
    assert covers(found, MiB, MiB) and covers(found, 17 * MiB - MiB, MiB)     # partition 1
    assert covers(found, 17 * MiB, MiB) and covers(found, 65503 * 512 - MiB, MiB)
    assert covers(found, backup * 512 + 512 - MiB, MiB)           # the image's backup
    assert not covers(found, 8 * MiB) and not covers(found, 40 * MiB)
    assert found == sorted(found)


def test_a_backup_header_naming_other_partitions_gets_those_wiped_too():
    """gdisk rebuilds from the backup when the primary is gone: its entries count."""
    img = image()
    gpt_header(img, 1, SIZE // 512 - 1, 2, [(2048, 4095)])
    gpt_header(img, SIZE // 512 - 1, 1, SIZE // 512 - 33, [(40 * 2048, 41 * 2048 - 1)])
    assert covers(ranges(img), 40 * MiB, MiB)


def test_a_gpt_made_for_4096_byte_sectors():
    img = image()
    gpt_header(img, 1, SIZE // 4096 - 1, 2, [(256, 4351)], sector=4096)
    found = ranges(img)
    assert covers(found, MiB, MiB) and covers(found, 17 * MiB - MiB, MiB)


def test_mbr_primaries_and_the_logical_partitions_of_the_ebr_chain():
    img = image()
    mbr(img, 0, [(0x83, 2048, 32768), (0x05, 36864, 65536)])
    # EBR 1 at the extended start: logical 5 at +2048, the next EBR at extended + 34816
    mbr(img, 36864 * 512, [(0x83, 2048, 4096), (0x05, 34816, 8192)])
    mbr(img, (36864 + 34816) * 512, [(0x83, 2048, 4096)])
    found = ranges(img)
    assert covers(found, MiB, MiB)                                 # primary 1
    assert covers(found, 36864 * 512, 512)                        # EBR 1
    assert covers(found, 38912 * 512, MiB)                        # logical 5
    assert covers(found, (36864 + 34816 + 2048) * 512, MiB)      # logical 6
    assert not covers(found, 30 * MiB)


def test_an_ebr_chain_that_loops_ends():
    img = image()
    mbr(img, 0, [(0x0F, 2048, 100000)])
    mbr(img, 2048 * 512, [(0x83, 2048, 100), (0x05, 0, 4096)])     # links to itself
    assert covers(ranges(img), 4096 * 512, 1)


def test_absurd_counts_and_offsets_are_bounded_and_cut_to_the_target():
    img = image(4 * MiB)
    gpt_header(img, 1, 2 ** 63, 2, [(2 ** 40, 2 ** 41), (7, 3)], count=2 ** 32 - 1)
    mbr(img, 0, [(0x83, 2 ** 32 - 1, 2 ** 32 - 1), (0x05, 0, 2 ** 32 - 1)])
    read_sizes = []

    def read(offset, n):
        read_sizes.append(n)
        return bytes(img[offset:offset + n])
    found = held_table.ranges(read, SIZE, MiB)
    assert max(read_sizes) <= held_table.MAX_ENTRIES * held_table.MAX_ENTRY_SIZE
    assert all(0 <= s and s + n <= SIZE for s, n in found)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=9000), st.integers(min_value=0, max_value=1 << 40))
def test_any_bytes_give_sorted_disjoint_ranges_inside_the_target(head, size):
    img = bytearray(head)
    found = held_table.ranges(reader(img), size, MiB)
    assert all(0 <= s and n > 0 and s + n <= size for s, n in found)
    assert all(a[0] + a[1] < b[0] for a, b in zip(found, found[1:]))
