"""Inspecting raw disk images from the host after the VM stopped: what is really on the disks.

The host kernel cannot scan partitions on loop devices, so everything here reads the image
files directly (sgdisk, sfdisk, blkid with an offset), never mounts them.
"""

import json
import os
import subprocess
from pathlib import Path

SECTOR = 512


def _run(argv):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, check=True).stdout


def sgdisk_print(image):
    """`sgdisk -p` text of an image (GPT)."""
    return _run(["sgdisk", "-p", image])


def partition_table(image):
    """sfdisk's JSON view: {"label": "gpt"|"dos", "partitions": [{"start", "size", "type", ...}]}.

    Returns None when the image has no partition table.
    """
    proc = subprocess.run(["sfdisk", "--json", str(image)], capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        return None
    return json.loads(proc.stdout)["partitiontable"]


def probe(image, offset=0, size=None):
    """blkid low-level probe of the bytes at offset: {"TYPE": "ext4", "UUID": ..., "LABEL": ...}.

    Empty dict when nothing is recognised (blkid exits 2).
    """
    argv = ["blkid", "-p", "-o", "export", "--offset", str(offset)]
    if size is not None:
        argv += ["--size", str(size)]
    proc = subprocess.run(argv + [str(image)], capture_output=True, text=True)
    if proc.returncode == 2:
        return {}
    proc.check_returncode()
    tags = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        if key and key != "DEVNAME":
            tags[key] = value
    return tags


def probe_partitions(image):
    """[(partition dict from sfdisk, blkid tags of its contents)] for every partition."""
    table = partition_table(image)
    if not table:
        return []
    unit = table.get("sectorsize", SECTOR)
    return [(p, probe(image, p["start"] * unit, p["size"] * unit)) for p in table["partitions"]]


LUKS_MAGIC = (b"LUKS\xba\xbe\x00\x02", b"SKUL\xba\xbe\x00\x02")    # LUKS2 primary, secondary


def luks_headers(image, step=16 << 20):
    """[(offset, "LUKS" or "SKUL")]: the LUKS2 header magic at sector boundaries of image (a
    sparse raw disk image; only its data regions are read). Finds headers inside arrays and
    logical volumes too, which no partition table points at."""
    found = set()
    with open(image, "rb") as f:
        fd, size, pos = f.fileno(), os.fstat(f.fileno()).st_size, 0
        while pos < size:
            try:
                pos = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:         # ENXIO: no data after pos
                break
            end = os.lseek(fd, pos, os.SEEK_HOLE)
            while pos < end:
                length = min(step, end - pos)
                block = os.pread(fd, length + 8, pos)
                for magic in LUKS_MAGIC:
                    i = block.find(magic)
                    while i != -1:
                        if i < length and (pos + i) % 512 == 0:
                            found.add((pos + i, magic[:4].decode()))
                        i = block.find(magic, i + 1)
                pos += length
    return sorted(found)


def luks_opens(image, offset, passphrase, workdir):
    """Whether passphrase opens a keyslot of the LUKS2 volume whose header is at offset of
    image: its first 16 MiB copied out, cryptsetup run on the copy (no device-mapper)."""
    header = Path(workdir) / f"luks-header-{offset}"
    with open(image, "rb") as src, open(header, "wb") as dst:
        src.seek(offset)
        dst.write(src.read(16 << 20))
    res = subprocess.run(["cryptsetup", "open", "--test-passphrase", "--key-file", "-",
                          str(header)], input=passphrase.encode(), capture_output=True)
    header.unlink()
    return res.returncode == 0
