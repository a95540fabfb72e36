"""Stale ZFS, bcache and LUKS signatures on a disk the plan names are gone after its wipe
(issue 53, leftovers of earlier lives), on loop devices with the wipe the executor runs.

The ramdisk has no zfs or bcache tools, so the VM bench cannot make these; here each is put on
a loop device as its own tools leave it, and `blkid -p` must call it what it is before the
wipe: bcache by make-bcache (bcache-tools, scripts/host-packages.sh), LUKS by cryptsetup, ZFS
by hand from its documented on-disk format, since Debian main has no zfs tools:

- a vdev carries four 256 KiB labels, L0 at 0 and L1 at 256 KiB, L2 and L3 in the last
  512 KiB of the device once its size is rounded down to 256 KiB;
- the second half of each label (from 128 KiB) is its ring of uberblocks, one per 1 KiB slot
  (at the smallest ashift), each starting with the 64-bit magic 0x00bab10c in the byte order
  of the machine that wrote it, then the pool version and the txg;
- libblkid calls a device zfs_member when it finds at least four uberblocks in the labels.

ZFS keeps half its labels at the end of the device; a wipe that cleared only the start would
leave a pool `zpool import` still finds. A second loop device beside the named one carries the
same signature and must be unchanged byte for byte.
"""

import struct
import subprocess

import pytest

from provision_agent.drivers import wipe
from provision_agent.run.runner import Runner
from tests.functional.disk_bytes import sha256_at
from tests.functional.prereq import require, sh

pytestmark = require("losetup", "blkid", "wipefs", "sgdisk", "make-bcache", "cryptsetup")

# not a multiple of 256 KiB: L2 and L3 sit below the rounded-down end, not at the last byte
SIZE = (96 << 20) + (68 << 10)
LABEL = 256 << 10
UBERBLOCK_RING = 128 << 10
SLOT = 1 << 10
MAGIC = 0x00BAB10C


def _label_offsets(size):
    end = size - size % LABEL
    return {"L0": 0, "L1": LABEL, "L2": end - 2 * LABEL, "L3": end - LABEL}


def _write_zfs_labels(dev, labels, order="<"):
    """Uberblocks (magic, version 5000, txg) in the first slots of each label named."""
    with open(dev, "r+b") as f:
        for name in labels:
            for slot in range(4):
                f.seek(_label_offsets(SIZE)[name] + UBERBLOCK_RING + slot * SLOT)
                f.write(struct.pack(f"{order}QQQ", MAGIC, 5000, 100 + slot))


def _uberblocks_left(dev):
    """Every 1 KiB slot of the four labels' rings that still starts with the magic."""
    found = []
    with open(dev, "rb") as f:
        for name, offset in _label_offsets(SIZE).items():
            f.seek(offset + UBERBLOCK_RING)
            ring = f.read(LABEL - UBERBLOCK_RING)
            for slot in range(0, len(ring), SLOT):
                if struct.unpack_from("<Q", ring, slot)[0] in (MAGIC, 0x0CB1BA0000000000):
                    found.append((name, slot // SLOT))
    return found


def _zfs(dev):
    _write_zfs_labels(dev, ("L0", "L1", "L2", "L3"))


def _zfs_at_the_end(dev):
    # a disk whose start was written since (a new table, a new filesystem): only L2 and L3
    # are left, in the other byte order
    _write_zfs_labels(dev, ("L2", "L3"), order=">")


def _bcache(dev):
    sh("make-bcache", "-B", dev)


def _luks(dev):
    subprocess.run(["cryptsetup", "luksFormat", "-q", "--type", "luks2", "--pbkdf", "pbkdf2",
                    "--pbkdf-force-iterations", "1000", dev, "-"], input=b"stale",
                   capture_output=True, check=True)


MAKERS = {"zfs": (_zfs, "zfs_member"), "zfs-end-labels": (_zfs_at_the_end, "zfs_member"),
          "bcache": (_bcache, "bcache"), "luks": (_luks, "crypto_LUKS")}


def _probe(dev):
    """blkid -p's TYPE ("" when it finds nothing) and wipefs -n's list of signatures."""
    blkid = subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", dev],
                           capture_output=True, text=True, check=False)
    return blkid.stdout.strip(), sh("wipefs", "-n", dev).strip()


@pytest.mark.parametrize("kind", list(MAKERS))
def test_a_stale_signature_on_a_named_disk_is_cleared_and_the_disk_beside_it_unchanged(loop,
                                                                                      kind):
    make, expected = MAKERS[kind]
    named, beside = loop(SIZE), loop(SIZE)
    for dev in (named, beside):
        make(dev)
        assert _probe(dev)[0] == expected, (kind, dev, _probe(dev))
    if kind.startswith("zfs"):
        assert _uberblocks_left(named)
    before = sha256_at(beside)

    wipe.wipe(Runner(), named)

    assert _probe(named) == ("", ""), (kind, _probe(named))
    assert _uberblocks_left(named) == []
    assert subprocess.run(["cryptsetup", "isLuks", named]).returncode != 0
    assert _probe(beside)[0] == expected and sha256_at(beside) == before
