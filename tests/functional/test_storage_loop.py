"""The storage drivers and the executor against real tools on loop devices and image files.

The host kernel has no md, no device-mapper and no partition scanning on loop devices, so this
covers what it can: whole-device filesystems through the full execute path (wipe, mkfs, mount,
fstab, umount), partition tables written to image files and read back, and wiping signatures.
Everything else is proven in the VM bench (tests/e2e/test_layouts.py).
"""

import json
import os
import subprocess
from types import SimpleNamespace

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.drivers import wipe
from provision_agent.plan import inventory, pipeline
from provision_agent.plan.steps import make as Step
from provision_agent.run import apply
from provision_agent.run.events import Events
from provision_agent.run.executor import Executor
from provision_agent.run.runner import Runner
from tests.functional.prereq import require, sh

pytestmark = require("losetup", "mkfs.ext4", "mkfs.xfs", "sgdisk", "parted", "sfdisk", "wipefs",
                     "blkid")


def test_execute_whole_device_filesystems_with_fstab(tmp_path, loop):
    root_dev, srv_dev = loop(512 << 20), loop(512 << 20)
    sh("mkfs.ext4", "-q", "-F", "-L", "stale", srv_dev)     # an old filesystem to wipe
    doc = {"version": 1,
           "disks": [{"id": "a", "match": {"name": root_dev}},
                     {"id": "b", "match": {"name": srv_dev}}],
           "filesystems": [{"device": "a", "type": "ext4", "mount": "/", "label": "root"},
                           {"device": "b", "type": "xfs", "mount": "/srv",
                            "mount_options": "noatime"}]}
    live = [inventory.normalize({"name": d, "size": 512 << 20}) for d in (root_dev, srv_dev)]
    planned = pipeline.build_plan(NativeDriver(doc).layout(), live)
    conf = SimpleNamespace(target_root=str(tmp_path / "target"), events_file=str(
        tmp_path / "events.jsonl"), events_fd=None)
    report = apply.provision(planned, conf, runner=Runner(), live_disks=live)

    uuids = {fs["device"]: fs["uuid"] for fs in report["filesystems"]}
    assert uuids[root_dev] == sh("blkid", "-p", "-s", "UUID", "-o", "value", root_dev).strip()
    assert sh("blkid", "-p", "-s", "TYPE", "-o", "value", srv_dev).strip() == "xfs"
    assert not os.path.ismount(tmp_path / "target"), "left mounted"
    check = tmp_path / "check"
    check.mkdir()
    sh("mount", root_dev, str(check))
    try:
        fstab = (check / "etc" / "fstab").read_text()
    finally:
        sh("umount", str(check))
    assert f"UUID={uuids[root_dev]}\t/\text4\tdefaults\t0\t1" in fstab
    assert f"UUID={uuids[srv_dev]}\t/srv\txfs\tnoatime\t0\t2" in fstab
    events = [json.loads(line) for line in open(conf.events_file)]
    assert events[-1] == {**events[-1], "event": "result", "status": "ok", "exit_code": 0}
    assert sum(e.get("status") == "done" for e in events) == len(planned.steps)


def test_failed_mkfs_exits_4_and_leaves_nothing_mounted(tmp_path, loop):
    dev = loop(64 << 20)     # too small for xfs (300 MB minimum): mkfs.xfs fails
    doc = {"version": 1, "disks": [{"id": "a", "match": {"name": dev}}],
           "filesystems": [{"device": "a", "type": "xfs", "mount": "/"}]}
    live = [inventory.normalize({"name": dev, "size": 64 << 20})]
    planned = pipeline.build_plan(NativeDriver(doc).layout(), live)
    conf = SimpleNamespace(target_root=str(tmp_path / "t"), events_file=None, events_fd=None)
    with pytest.raises(Exception) as exc:
        apply.provision(planned, conf, runner=Runner(), live_disks=live)
    assert getattr(exc.value, "exit_code", None) == 4
    assert "mkfs.xfs" in str(exc.value)
    assert not os.path.ismount(tmp_path / "t")


def test_wipe_removes_signatures_and_zeroes_the_edges(loop):
    dev = loop(64 << 20)
    sh("mkfs.ext4", "-q", "-F", dev)
    with open(dev, "r+b") as f:
        f.seek((64 << 20) - 4096)
        f.write(b"\xff" * 4096)
    wipe.wipe(Runner(), dev)
    assert subprocess.run(["blkid", "-p", dev], capture_output=True).returncode == 2
    with open(dev, "rb") as f:
        f.seek((64 << 20) - (1 << 20))
        assert f.read(1 << 20) == bytes(1 << 20)


@pytest.mark.parametrize("label", ["gpt", "msdos"])
def test_partition_table_written_and_read_back(tmp_path, label):
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    doc = {"version": 1, "disks": [{"id": "d", "match": {"name": "/dev/vdz"}, "table": label,
           "partitions": [{"id": f"p{i}", "size": "8MiB"} for i in range(5)]
           + [{"id": "last", "size": "remaining", "type": "swap"}]}],
           "filesystems": [{"device": "p0", "type": "ext4", "mount": "/"}]}
    planned = pipeline.build_plan(NativeDriver(doc).layout(),
                                  [inventory.normalize({"name": "/dev/vdz", "size": 64 << 20})])
    calls = []

    class Counting(Runner):
        def run(self, argv, **kw):
            calls.append(argv[0])
            return super().run(argv, **kw)

    steps = [Step(s.kind, dict(s.args, disk=str(img)), s.description) for s in planned.steps
             if s.kind in ("partition_table", "partition")]
    Executor(Counting(), Events(), str(tmp_path / "target")).execute(steps)
    if label == "gpt":
        assert calls == ["sgdisk"]      # the table and its six partitions in one call
    table = json.loads(sh("sfdisk", "--json", str(img)))["partitiontable"]
    planned_parts = [s.args for s in planned.steps if s.kind == "partition"]
    got = [(p["start"] * 512, p["size"] * 512) for p in table["partitions"]]
    assert got == [(a["offset"], a["size"]) for a in planned_parts]
    assert table["label"] == ("gpt" if label == "gpt" else "dos")
    if label == "msdos":
        assert [p["type"] for p in table["partitions"]][3:5] == ["f", "83"]
        assert table["partitions"][-1]["type"] == "82"
    else:
        assert table["partitions"][-1]["type"] == "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F"
