"""Which logical sector size a whole-disk image's partition table was made for.

A partition table counts in the logical sectors of the disk it was made for: a GPT header is
at LBA 1 (byte 512 for 512-byte sectors, byte 4096 for 4Kn) and its entries and every msdos
entry give partitions in LBAs. Written to a disk of another logical sector size, the firmware
and the kernel find no table, or partitions at eight times (or an eighth of) their offsets:
the image cannot boot. It is refused before its first byte is written.

An msdos table says nothing of its sector size: it is told by what sits where its first
partition starts under each reading (a boot sector, a filesystem, LVM, md or LUKS header),
looked for in the image's first block. When that does not tell, the image is let through,
said in the log.
"""

import logging
import struct

from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

SIZES = (512, 1024, 2048, 4096)
GPT_SIGNATURE = b"EFI PART"
# the bytes that start what a partition commonly holds: (offset in it, magic)
CONTENT_MAGIC = ((0, b"XFSB"), (0, b"LUKS\xba\xbe"), (0x438, b"\x53\xef"),
                 (0x200, b"LABELONE"), (0x218, b"LVM2 001"), (0x1000, b"\xfc\x4e\x2b\xa9"),
                 (0x10040, b"_BHRfS_M"), (0x1fe, b"\x55\xaa"))
MBR_TYPES_EMPTY = (0x00, 0xee)      # unused entry, GPT's protective one
NOTHING = {False: "Nothing of it was written.",
           True: "Nothing of it was written: refused before the run's first write, the disk "
                 "holds what it held."}


def table_sector_size(data):
    """(sector size, "gpt" | "msdos") the table at the start of data was made for, or
    (None, label) when it cannot be told, (None, None) for no table."""
    for size in SIZES:
        if bytes(data[size:size + 8]) == GPT_SIGNATURE:
            return size, "gpt"
    if len(data) < 512 or bytes(data[510:512]) != b"\x55\xaa":
        return None, None
    starts = []
    for i in range(4):
        entry = bytes(data[446 + 16 * i:446 + 16 * (i + 1)])
        kind, start = entry[4], struct.unpack_from("<I", entry, 8)[0]
        if kind not in MBR_TYPES_EMPTY and start:
            starts.append(start)
    fits = [size for size in SIZES if starts and any(_holds_content(data, s * size)
                                                     for s in starts)]
    return (fits[0] if len(fits) == 1 else None), "msdos"


def _holds_content(data, offset):
    return any(len(data) >= offset + at + len(magic)
               and bytes(data[offset + at:offset + at + len(magic)]) == magic
               for at, magic in CONTENT_MAGIC)


def check(data, target, disk_sector, uri, before_run=False):
    """Refuse a whole-disk image whose table was made for other sectors than target's
    (disk_sector: its logical block size, None when unknown). data: the image's first block;
    before_run: checked before the run's first write (the preflight), not as it is written."""
    made, label = table_sector_size(data)
    if made is None or disk_sector is None:
        if label == "msdos":
            LOG.warning("image %s: which sector size its msdos table was made for cannot be "
                        "told from its first block; %s has %s-byte sectors", uri, target,
                        disk_sector)
        return
    if made != disk_sector:
        raise ImageError(f"image {uri}: its {label} partition table was made for {made}-byte "
                         f"sectors, and {target} has {disk_sector}-byte logical sectors: "
                         f"written there it cannot boot (the table would be read at other "
                         f"offsets). {NOTHING[before_run]} Use an image built for "
                         f"{disk_sector}-byte sectors, or a layout with a partition or tar "
                         f"image")
