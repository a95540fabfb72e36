"""A disk that names its table and no partitions gets an empty table of that kind, through
the whole run on loop devices (issue 56: it was wiped and left with none). Read back with
sfdisk and blkid."""

import json
from types import SimpleNamespace

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.plan import inventory, pipeline
from provision_agent.run import apply
from provision_agent.run.runner import Runner
from tests.functional.prereq import require, sh

pytestmark = require("losetup", "mkfs.ext4", "sgdisk", "sfdisk", "wipefs", "blkid")


@pytest.mark.parametrize("table,label", [("msdos", "dos"), ("gpt", "gpt")])
def test_a_named_table_without_partitions_is_written_empty(tmp_path, loop, table, label):
    root_dev, spare = loop(256 << 20), loop(64 << 20)
    sh("mkfs.ext4", "-q", "-F", "-L", "stale", spare)     # what the wipe clears first
    doc = {"version": 1,
           "disks": [{"id": "a", "match": {"name": root_dev}},
                     {"id": "b", "match": {"name": spare}, "table": table}],
           "filesystems": [{"device": "a", "type": "ext4", "mount": "/"}]}
    live = [inventory.normalize({"name": root_dev, "size": 256 << 20}),
            inventory.normalize({"name": spare, "size": 64 << 20})]
    planned = pipeline.build_plan(NativeDriver(doc).layout(), live)
    conf = SimpleNamespace(target_root=str(tmp_path / "target"), events_file=None,
                           events_fd=None)
    apply.provision(planned, conf, runner=Runner(), live_disks=live)

    got = json.loads(sh("sfdisk", "--json", spare))["partitiontable"]
    assert (got["label"], got.get("partitions", [])) == (label, [])
    assert sh("blkid", "-p", "-s", "PTTYPE", "-o", "value", spare).strip() == label
    assert "ext4" not in sh("wipefs", "--no-act", spare)          # the old filesystem is gone
