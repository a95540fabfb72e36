"""Inspecting raw disk images from the host after the VM stopped: what is really on the disks.

The host kernel cannot scan partitions on loop devices, so everything here reads the image
files directly (sgdisk, sfdisk, blkid with an offset), never mounts them.
"""

import json
import subprocess

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
