"""Partition tables on loop devices of 512- and 4096-byte logical sectors (4Kn), written by
the executor from a plan and read back with sgdisk and sfdisk: the partitions sit at the bytes
the plan says, in the disk's own sectors.

Issue 53: on a 4 GiB loop device with 4096-byte sectors, the GPT layout below failed at the
partition step ("Could not create partition 1 from 2048 to 1050623", exit 4) after the wipe
had run, the plan's 512-byte sector numbers having been handed to sgdisk as they were. The
host has no partition scanning on loop devices: the tables are read back from the device.
"""

import json
import os
import re
import subprocess

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.plan import inventory, pipeline
from provision_agent.plan.units import GiB, MiB
from provision_agent.run.events import Events
from provision_agent.run.executor import Executor
from provision_agent.run.runner import Runner
from tests.functional.disk_bytes import sha256_at
from tests.functional.prereq import require, sh

pytestmark = require("losetup", "sgdisk", "sfdisk", "parted", "wipefs")

DISK = 4 * GiB


@pytest.fixture
def sector_loop(loop):
    """make(sector_size, size) -> a loop device of that logical sector size (4 GiB unless
    size says)."""
    return lambda sector_size, size=DISK: loop(size, sector_size)


def live_disk(dev):
    """The loop device as discovery describes a disk: its block sizes from sysfs (discovery
    leaves loop devices out of the inventory, so the fields are read here the same way)."""
    queue = f"/sys/class/block/{os.path.basename(dev)}/queue"
    sizes = {key: int(open(f"{queue}/{key}").read()) for key in
             ("logical_block_size", "physical_block_size")}
    return inventory.normalize({"name": dev, "size": DISK, **sizes})


def layout(dev, table, partitions):
    return {"version": 1, "disks": [{"id": "d", "match": {"name": dev}, "table": table,
                                     "partitions": partitions}],
            "filesystems": [{"device": partitions[-1]["id"], "type": "ext4", "mount": "/"}]}


# the issue's layout: ESP 512 MiB, /boot 1 GiB, / the rest
ISSUE = [{"id": "esp", "size": "512MiB", "type": "esp"}, {"id": "boot", "size": "1GiB"},
         {"id": "root", "size": "remaining"}]
# six msdos partitions: three primaries, an extended one and three logicals behind EBRs
SIX = [{"id": f"p{i}", "size": "100MiB"} for i in range(5)] + [{"id": "root",
                                                                  "size": "remaining"}]


@pytest.mark.parametrize("sector,table,parts", [
    (4096, "gpt", ISSUE), (4096, "msdos", ISSUE), (4096, "msdos", SIX),
    (512, "gpt", ISSUE), (512, "msdos", ISSUE), (512, "msdos", SIX)])
def test_planned_bytes_are_where_the_table_puts_them(tmp_path, sector_loop, sector, table,
                                                     parts):
    dev = sector_loop(sector)
    disk = live_disk(dev)
    assert disk["logical_block_size"] == sector
    planned = pipeline.build_plan(NativeDriver(layout(dev, table, parts)).layout(), [disk])
    steps = [s for s in planned.steps if s.kind in ("wipe", "partition_table", "partition")]
    Executor(Runner(), Events(), str(tmp_path / "target")).execute(steps)

    want = [(s.args["number"], s.args["offset"], s.args["size"]) for s in steps
            if s.kind == "partition" and s.args["kind"] != "extended"]
    if parts is ISSUE:      # GPT's backup costs the last MiB once aligned; msdos has none
        assert [w[1:] for w in want] == [(MiB, 512 * MiB), (513 * MiB, GiB), (
            1537 * MiB, DISK - 1537 * MiB - (MiB if table == "gpt" else 0))]
    got = json.loads(sh("sfdisk", "--json", dev))["partitiontable"]
    assert got["sectorsize"] == sector
    assert got["label"] == ("gpt" if table == "gpt" else "dos")
    number = {p["node"]: int(re.search(r"(\d+)$", p["node"]).group(1)) for p in
              got["partitions"]}
    read = [(number[p["node"]], p["start"] * sector, p["size"] * sector)
            for p in got["partitions"] if p.get("type") not in ("5", "f", "85")]
    assert read == want
    if table == "gpt":
        printed = sh("sgdisk", "-p", dev)
        assert f"Sector size (logical/physical): {sector}/{sector} bytes" in printed
        # sgdisk's own view: first and last sector of each partition, in the disk's sectors
        rows = [tuple(int(x) for x in line.split()[:3])
                for line in printed.splitlines() if re.match(r"\s+\d+\s+\d+\s+\d+\s", line)]
        assert rows == [(n, off // sector, (off + size) // sector - 1) for n, off, size in want]
        # the GPT's own reservations for this sector size: 16 KiB of entries in whole sectors
        entries = 16384 // sector
        assert f"First usable sector is {2 + entries}," in printed
        assert f"last usable sector is {DISK // sector - 2 - entries}" in printed


def test_a_kept_partition_keeps_its_bytes_on_a_4kn_disk(tmp_path, sector_loop):
    """A re-provision with keep on /boot of the issue's layout on a 4Kn disk: the preflight's
    check finds the partition where the plan says, the table is rewritten around it, and its
    bytes stay where they were with their contents. (The wipe step is left out: with no
    partition scanning on this host it cannot see the partitions it must spare.)"""

    from provision_agent.drivers import partitions

    dev = sector_loop(4096)
    disk = live_disk(dev)
    first = pipeline.build_plan(NativeDriver(layout(dev, "gpt", ISSUE)).layout(), [disk])
    steps = [s for s in first.steps if s.kind in ("partition_table", "partition")]
    Executor(Runner(), Events(), str(tmp_path / "target")).execute(steps)
    boot = next(s.args for s in steps if s.kind == "partition" and s.args["number"] == 2)
    data = os.urandom(1 << 20)
    with open(dev, "r+b") as f:                 # the kept data: its first and last MiB
        f.seek(boot["offset"])
        f.write(data)
        f.seek(boot["offset"] + boot["size"] - len(data))
        f.write(data)
        os.fsync(f.fileno())

    before = sha256_at(dev, boot["offset"], boot["size"])
    # the partitions behind /boot change: / shrinks to 1 GiB and a data partition follows
    kept = [ISSUE[0], dict(ISSUE[1], keep=True), {"id": "root", "size": "1GiB"},
            {"id": "data", "size": "remaining"}]
    second = pipeline.build_plan(NativeDriver(layout(dev, "gpt", kept)).layout(), [disk])
    steps = [s for s in second.steps if s.kind in ("partition_table", "partition")]
    plan_boot = next(s.args for s in steps if s.kind == "partition" and s.args["keep"])
    assert (plan_boot["offset"], plan_boot["size"]) == (boot["offset"], boot["size"])
    assert partitions.check_kept(partitions.read_table(Runner(), dev), plan_boot) is None
    Executor(Runner(), Events(), str(tmp_path / "target")).execute(steps)

    got = json.loads(sh("sfdisk", "--json", dev))["partitiontable"]
    by_number = {int(re.search(r"(\d+)$", p["node"]).group(1)): p for p in got["partitions"]}
    assert (by_number[2]["start"] * 4096, by_number[2]["size"] * 4096) == (513 * MiB, GiB)
    assert sha256_at(dev, boot["offset"], boot["size"]) == before
    assert [(n, p["start"] * 4096, p["size"] * 4096) for n, p in sorted(by_number.items())] \
        == sorted((s.args["number"], s.args["offset"], s.args["size"]) for s in steps
                  if s.kind == "partition")


def gpt_image(tmp_path, sector_loop, sector):
    """A 64 MiB whole-disk image whose GPT was made on a disk of `sector`-byte sectors: an
    ext4 at 1 MiB, written through a loop device of that size and copied to a file."""
    dev = sector_loop(sector, 64 * MiB)
    sh("sgdisk", f"--new=1:{MiB // sector}:{33 * MiB // sector - 1}", dev)
    part = sh("losetup", "-o", str(MiB), "--sizelimit", str(32 * MiB), "-f", "--show",
              dev).strip()
    try:
        sh("mkfs.ext4", "-q", "-F", part)
    finally:
        subprocess.run(["losetup", "-d", part], capture_output=True)
    image = tmp_path / f"disk-{sector}.img"
    with open(dev, "rb") as src, open(image, "wb") as dst:
        dst.write(src.read(64 * MiB))
    return image


@pytest.mark.parametrize("made,disk", [(512, 4096), (4096, 512), (4096, 4096), (512, 512)])
def test_a_whole_disk_image_for_other_sectors_is_refused_before_it_is_written(
        tmp_path, sector_loop, made, disk):
    """The image's GPT header at byte 512 or 4096 says which sectors it was made for: onto a
    disk of the other size it cannot boot, and not a byte of it is written there."""
    import hashlib

    from provision_agent.drivers.images import writer
    from provision_agent.errors import ImageError

    image = gpt_image(tmp_path, sector_loop, made)
    checksum = "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    dev = sector_loop(disk)
    if made != disk:
        with pytest.raises(ImageError) as exc:
            writer.write_to(str(image), dev, fmt="disk", checksum=checksum, runner=Runner())
        assert f"was made for {made}-byte sectors, and {dev} has {disk}-byte" in str(exc.value)
        with open(dev, "rb") as f:
            assert f.read(64 * MiB) == bytes(64 * MiB), "the refused image reached the disk"
        return
    writer.write_to(str(image), dev, fmt="disk", checksum=checksum, runner=Runner())
    got = json.loads(sh("sfdisk", "--json", dev))["partitiontable"]
    (part,) = got["partitions"]
    assert (got["sectorsize"], part["start"] * disk, part["size"] * disk) == (disk, MiB,
                                                                               32 * MiB)
    # the image's table ended at 64 MiB; its backup header was moved to the disk's end, which
    # needs the table found where this sector size puts it
    assert got["lastlba"] == DISK // disk - 2 - 16384 // disk


@pytest.mark.parametrize("fmt", ["disk", "qcow2"])
def test_a_512_byte_whole_disk_image_is_refused_on_a_4kn_disk(tmp_path, sector_loop, fmt):
    """The plan's write_image step for a whole-disk image made for 512-byte sectors, raw
    (format disk) or qcow2 converted onto the disk (Ironic's commonest whole-disk image):
    refused on a 4Kn disk before any of the image reaches it (the qcow2's table read from the
    verified copy before qemu-img converts it)."""
    from provision_agent.errors import ImageError
    dev = sector_loop(4096)
    raw = tmp_path / "disk512.img"
    with open(raw, "wb") as f:
        f.truncate(64 * MiB)
    sh("sgdisk", "-n1:2048:0", "-t1:8300", str(raw))
    image = raw
    if fmt == "qcow2":
        image = tmp_path / "disk512.qcow2"
        sh("qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", str(raw), str(image))
    doc = {"version": 1, "disks": [{"id": "d", "match": {"name": dev}}],
           "images": [{"uri": str(image), "format": fmt, "target": "d",
                       "allow_no_checksum": True}],
           "bootloader": {"type": "image", "boot_mode": "uefi"}}
    planned = pipeline.build_plan(NativeDriver(doc).layout(), [live_disk(dev)])
    steps = [s for s in planned.steps if s.kind == "write_image"]
    with pytest.raises(ImageError) as exc:
        Executor(Runner(), Events(), str(tmp_path / "target")).execute(steps)
    assert (f"its gpt partition table was made for 512-byte sectors, and {dev} has 4096-byte "
            f"logical sectors") in str(exc.value)
    with open(dev, "rb") as f:
        head = f.read(8 * MiB)
    assert b"EFI PART" not in head and head[510:512] != b"\x55\xaa"


@pytest.mark.parametrize("made,disk,fmt,compression", [
    (512, 4096, "disk", None), (512, 4096, "disk", "gzip"), (512, 4096, "qcow2", None),
    (4096, 512, "disk", None), (4096, 512, "qcow2", "gzip")])
def test_an_image_for_other_sectors_is_refused_before_the_wipe(tmp_path, sector_loop, made,
                                                               disk, fmt, compression):
    """The whole run (apply.provision: preflight, then the plan from its wipe on) of a
    whole-disk image made for other sectors than its disk's, raw, gzip-compressed or qcow2:
    refused with exit 5 before the run's first write. The disk keeps what it held, byte for
    byte: its old table and a marker past the image's end (before, the writer refused the
    image only after the plan's wipe had cleared them)."""
    from types import SimpleNamespace

    from provision_agent.errors import ImageError
    from provision_agent.run import apply

    image = gpt_image(tmp_path, sector_loop, made)
    if fmt == "qcow2":
        sh("qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", str(image),
           str(image) + ".qcow2")
        image = tmp_path / (image.name + ".qcow2")
    if compression == "gzip":
        sh("gzip", "-k", "-1", str(image))
        image = tmp_path / (image.name + ".gz")
    size = 256 * MiB
    dev = sector_loop(disk, size)
    sh("sgdisk", f"--new=1:{MiB // disk}:{65 * MiB // disk - 1}", dev)    # its old table
    with open(dev, "r+b") as f:
        f.seek(100 * MiB)
        f.write(b"kept by the refusal " * 1000)
    before = sha256_at(dev, 0, size)
    doc = {"version": 1, "disks": [{"id": "d", "match": {"name": dev}}],
           "images": [{"uri": str(image), "format": fmt, "target": "d",
                       "allow_no_checksum": True}],
           "bootloader": {"type": "image", "boot_mode": "uefi"}}
    live = [dict(live_disk(dev), size=size)]
    planned = pipeline.build_plan(NativeDriver(doc).layout(), live)
    assert planned.steps[0].kind == "wipe"
    conf = SimpleNamespace(target_root=str(tmp_path / "target"), events_file=None,
                           events_fd=None)
    with pytest.raises(ImageError) as exc:
        apply.provision(planned, conf, runner=Runner(), live_disks=live)
    assert sha256_at(dev, 0, size) == before, "the disk changed before the image was refused"
    assert exc.value.exit_code == 5
    assert (f"image {image}: its gpt partition table was made for {made}-byte sectors, and "
            f"{dev} has {disk}-byte logical sectors") in str(exc.value)
    assert "Nothing of it was written: refused before the run's first write" in str(exc.value)
