"""Keeping in place on loop devices (issue 54), with the real tools: an msdos table with an
extended partition and logical ones written as a layout gives them, read back with sfdisk; a
re-provision that describes that table by number and offset keeps a logical partition byte for
byte while the partitions around it are made anew; a kept device's contents wiped (signatures
and edges, or every byte) while nothing outside it is touched. (No partition scanning and no
md on this host: the wipe runs on a whole loop device, the kept array in unit tests.)"""

import json
import os
import re

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.drivers import wipe
from provision_agent.plan import inventory, pipeline
from provision_agent.run.events import Events
from provision_agent.run.executor import Executor
from provision_agent.run.runner import Runner
from tests.functional.disk_bytes import sha256_at
from tests.functional.prereq import require, sh

pytestmark = require("losetup", "sgdisk", "parted", "sfdisk", "wipefs", "blkid", "mkfs.ext4",
                     "blkdiscard")

MiB = 1 << 20
DISK = 256 * MiB


def msdos(dev, keep_logical):
    """A primary, an extended partition and two logical ones (curtin's reuse-msdos-partitions,
    scaled): places written out by number and offset."""
    kept = {"keep": True} if keep_logical else {}
    return {"version": 1, "disks": [{"id": "d", "match": {"name": dev}, "table": "msdos",
                                     "partitions": [
        {"id": "p1", "number": 1, "offset": "1MiB", "size": "64MiB"},
        {"id": "ext", "number": 2, "type": "extended", "offset": "66MiB", "size": "150MiB",
         **kept},
        {"id": "p5", "number": 5, "offset": "67MiB", "size": "63MiB", **kept},
        {"id": "p6", "number": 6, "offset": "131MiB", "size": "remaining", "type": "swap"}]}],
        "filesystems": [{"device": "p1", "type": "ext4", "mount": "/"}]}


def table(dev):
    got = json.loads(sh("sfdisk", "--json", dev))["partitiontable"]
    return {int(re.search(r"(\d+)$", p["node"]).group(1)): (p["start"] * 512, p["size"] * 512,
                                                           p["type"])
            for p in got["partitions"]}


def run_tables(planned, tmp_path):
    steps = [s for s in planned.steps if s.kind in ("partition_table", "partition")]
    Executor(Runner(), Events(), str(tmp_path / "t")).execute(steps)
    return steps


def test_an_msdos_table_written_out_is_written_as_given_and_a_kept_logical_keeps_its_bytes(
        tmp_path, loop):
    dev = loop(DISK)
    live = [inventory.normalize({"name": dev, "size": DISK})]
    run_tables(pipeline.build_plan(NativeDriver(msdos(dev, False)).layout(), live), tmp_path)
    first = table(dev)
    assert first == {1: (MiB, 64 * MiB, "83"), 2: (66 * MiB, 150 * MiB, "f"),
                     5: (67 * MiB, 63 * MiB, "83"), 6: (131 * MiB, 85 * MiB, "82")}
    offset, size, _ = first[5]
    with open(dev, "r+b") as f:          # the data of the logical partition to keep
        f.seek(offset)
        f.write(os.urandom(size))
        os.fsync(f.fileno())

    before = sha256_at(dev, offset, size)
    # the same table, partition 5 (and the extended one holding it) kept, 1 and 6 made anew
    steps = run_tables(pipeline.build_plan(NativeDriver(msdos(dev, True)).layout(), live),
                       tmp_path)
    assert [s.args["number"] for s in steps if s.kind == "partition" and s.args["keep"]] == [2, 5]
    assert table(dev) == first
    assert sha256_at(dev, offset, size) == before


def test_wipe_contents_clears_signatures_and_edges_or_zeroes_all_and_nothing_else(loop):
    dev, neighbour = loop(64 * MiB), loop(64 * MiB)
    for d in (dev, neighbour):
        sh("mkfs.ext4", "-q", "-F", d)
    with open(dev, "r+b") as f:
        f.seek(32 * MiB)
        f.write(b"m" * MiB)             # data in the middle: kept by "superblock"
    wipe.wipe_contents(Runner(), dev, "superblock")
    assert sh("blkid", "-p", "-o", "value", "-s", "TYPE", neighbour).strip() == "ext4"
    assert not sh("wipefs", "--noheadings", dev).strip()
    with open(dev, "rb") as f:
        assert f.read(MiB) == bytes(MiB)
        f.seek(32 * MiB)
        assert f.read(MiB) == b"m" * MiB
        f.seek(-MiB, os.SEEK_END)
        assert f.read(MiB) == bytes(MiB)
    wipe.wipe_contents(Runner(), dev, "zero")
    with open(dev, "rb") as f:
        assert f.read() == bytes(64 * MiB)
    assert sh("blkid", "-p", "-o", "value", "-s", "TYPE", neighbour).strip() == "ext4"


@pytest.mark.parametrize("start", [1, 3])
def test_gpt_partitions_at_given_offsets_and_numbers_read_back_as_given(tmp_path, loop, start):
    dev = loop(DISK)
    doc = {"version": 1, "disks": [{"id": "d", "match": {"name": dev}, "partitions": [
        {"id": "a", "number": 2, "offset": f"{start}MiB", "size": "1000000B"},
        {"id": "root", "number": 7, "offset": "100MiB", "size": "64MiB"},
        {"id": "c", "size": "remaining"}]}],
        "filesystems": [{"device": "root", "type": "ext4", "mount": "/"}]}
    live = [inventory.normalize({"name": dev, "size": DISK})]
    run_tables(pipeline.build_plan(NativeDriver(doc).layout(), live), tmp_path)
    got = table(dev)
    assert sorted(got) == [2, 7, 8]
    # 1000000 bytes: 1953.125 sectors, so 1954 of them
    assert got[2][:2] == (start * MiB, 1954 * 512)
    assert got[7][:2] == (100 * MiB, 64 * MiB)
    assert got[8][0] == 164 * MiB
