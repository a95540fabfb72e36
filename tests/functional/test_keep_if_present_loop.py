"""A partition kept if the disk holds it (Ironic's preserve_ephemeral) on a loop device: its
place is read from the live table with sfdisk, the table is rewritten around it, and its bytes
stay where they were with their contents, at 512- and 4096-byte logical sectors. (The wipe
step is left out, as in the other table tests here: without partition scanning on this host
it cannot see the partitions it spares.)"""

import json
import os
import re

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.drivers import partitions
from provision_agent.machine import disks as machine_disks
from provision_agent.plan import inventory, pipeline
from provision_agent.run.events import Events
from provision_agent.run.executor import Executor
from provision_agent.run.runner import Runner
from tests.functional.disk_bytes import sha256_at
from tests.functional.prereq import require, sh

pytestmark = require("losetup", "sgdisk", "parted", "sfdisk")

DISK = 256 << 20
MiB = 1 << 20


@pytest.fixture
def sector_loop(loop):
    """make(sector_size) -> a loop device of that logical sector size."""
    return lambda sector_size: loop(DISK, sector_size)


def layout(dev, label, parts):
    return {"version": 1, "disks": [{"id": "d", "match": {"name": dev}, "table": label,
                                     "partitions": parts}],
            "filesystems": [{"device": "root", "type": "ext4", "mount": "/"}]}


def table_steps(planned):
    return [s for s in planned.steps if s.kind in ("partition_table", "partition")]


def by_number(dev):
    got = json.loads(sh("sfdisk", "--json", dev))["partitiontable"]
    sector = got.get("sectorsize", 512)
    return {int(re.search(r"(\d+)$", p["node"]).group(1)): (p["start"] * sector,
                                                           p["size"] * sector)
            for p in got["partitions"]}


@pytest.mark.parametrize("sector", [512, 4096])
@pytest.mark.parametrize("label", ["gpt", "msdos"])
def test_a_partition_kept_if_present_keeps_its_place_and_bytes(tmp_path, sector_loop, label,
                                                              sector):
    dev = sector_loop(sector)
    live = [inventory.normalize({"name": dev, "size": DISK, "logical_block_size": sector,
                                 "physical_block_size": sector})]
    # an earlier deploy: the ephemeral partition 2 is 3 MiB in (behind 2 MiB of partition 1)
    first = pipeline.build_plan(NativeDriver(layout(dev, label, [
        {"id": "gap", "size": "2MiB"}, {"id": "eph", "size": "64MiB"},
        {"id": "root", "size": "remaining"}])).layout(), live)
    Executor(Runner(), Events(), str(tmp_path / "t")).execute(table_steps(first))
    offset, size = by_number(dev)[2]
    data = os.urandom(MiB)
    with open(dev, "r+b") as f:          # the tenant's data: its first and last MiB
        for at in (offset, offset + size - MiB):
            f.seek(at)
            f.write(data)
        os.fsync(f.fileno())

    before = sha256_at(dev, offset, size)
    # the rebuild's layout numbers it 2 as well but would place it 1 MiB earlier: the
    # place comes from the disk, and the partitions behind it move
    doc = layout(dev, label, [{"id": "boot", "size": "1MiB"},
                              {"id": "eph", "size": "64MiB", "keep": "if_present"},
                              {"id": "root", "size": "100MiB"},
                              {"id": "data", "size": "remaining"}])
    doc["filesystems"].append({"device": "eph", "type": "ext4"})
    with_tables = machine_disks.with_tables(live, Runner())
    second = pipeline.build_plan(NativeDriver(doc).layout(), with_tables)
    steps = table_steps(second)
    kept = next(s.args for s in steps if s.kind == "partition" and s.args["keep"])
    assert kept["number"] == 2 and kept["offset"] == offset == 3 * MiB
    assert [s.args["device"] for s in second.steps if s.kind == "mkfs"] == [
        s.args["device"] for s in steps if s.kind == "partition" and s.args["number"] == 3]
    assert partitions.check_kept(partitions.read_table(Runner(), dev), kept) is None
    Executor(Runner(), Events(), str(tmp_path / "t")).execute(steps)

    after = by_number(dev)
    assert after[2] == (offset, size)
    assert sha256_at(dev, offset, size) == before
    planned = {s.args["number"]: (s.args["offset"], s.args["size"]) for s in steps
               if s.kind == "partition"}
    assert after == planned
