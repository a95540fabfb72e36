"""Which sector size a whole-disk image's table was made for, told from its first block."""

import struct

import pytest

from provision_agent.drivers import image_sectors
from provision_agent.errors import ImageError

MiB = 1 << 20


def mbr(starts, size=4 * MiB):
    data = bytearray(size)
    for i, start in enumerate(starts):
        entry = 446 + 16 * i
        data[entry + 4] = 0x83
        struct.pack_into("<II", data, entry + 8, start, 1000)
    data[510:512] = b"\x55\xaa"
    return data


def gpt(sector):
    data = mbr([1])
    data[446 + 4] = 0xEE                         # the protective entry
    data[sector:sector + 8] = b"EFI PART"
    return data


def ext4_at(data, offset):
    data[offset + 0x438:offset + 0x43a] = b"\x53\xef"
    return data


@pytest.mark.parametrize("sector", [512, 4096])
def test_a_gpt_header_at_lba_1_tells_the_sector_size(sector):
    assert image_sectors.table_sector_size(gpt(sector)) == (sector, "gpt")


def test_an_msdos_table_is_told_by_what_its_first_partition_holds():
    assert image_sectors.table_sector_size(ext4_at(mbr([2048]), MiB)) == (512, "msdos")
    assert image_sectors.table_sector_size(ext4_at(mbr([256]), MiB)) == (4096, "msdos")
    xfs = mbr([256])
    xfs[MiB:MiB + 4] = b"XFSB"
    assert image_sectors.table_sector_size(xfs) == (4096, "msdos")
    # nothing recognisable where the partition starts: not told
    assert image_sectors.table_sector_size(mbr([2048])) == (None, "msdos")
    assert image_sectors.table_sector_size(bytearray(8192)) == (None, None)


@pytest.mark.parametrize("made,disk", [(512, 4096), (4096, 512)])
def test_an_image_for_other_sectors_than_the_disks_is_refused(made, disk):
    with pytest.raises(ImageError) as exc:
        image_sectors.check(gpt(made), "/dev/sda", disk, "http://images.example/disk.img")
    assert (f"image http://images.example/disk.img: its gpt partition table was made for "
            f"{made}-byte sectors, and /dev/sda has {disk}-byte logical sectors: written "
            f"there it cannot boot") in str(exc.value)
    assert "Nothing of it was written" in str(exc.value)


def test_an_image_for_the_disks_sectors_or_one_not_told_is_written(caplog):
    image_sectors.check(gpt(4096), "/dev/sda", 4096, "u")
    image_sectors.check(gpt(512), "/dev/sda", None, "u")         # the disk's size unknown
    image_sectors.check(mbr([2048]), "/dev/sda", 4096, "u")
    assert "cannot be told from its first block" in caplog.text
