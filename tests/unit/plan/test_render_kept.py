"""The printed plan and the JSON plan say what is kept: an operator checking a dry run before
re-installing a pet must see "kept" on every kept partition, volume and filesystem, and on the
steps that touch them."""

import json

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline, render
from tests.unit.helpers import inventory

DISKS = inv_mod.from_document(inventory("three-disks"))

KEPT = {"version": 1,
        "disks": [{"id": "d", "match": {"name": "vda"}, "partitions": [
            {"id": "bios", "size": "1MiB", "type": "bios_grub"},
            {"id": "root", "size": "1GiB"},
            {"id": "data", "size": "1GiB", "type": "custom", "keep": True,
             "type_guid": "0FC63DAF-8483-4772-8E79-3D69D8477DE4"},
            {"id": "pv", "size": "remaining", "type": "lvm", "keep": True}]}],
        "volume_groups": [{"id": "vg", "name": "vg0", "pvs": ["pv"], "keep": True,
                           "logical_volumes": [{"id": "srv", "name": "srv", "size": "1GiB"}]}],
        "filesystems": [{"device": "root", "type": "ext4", "mount": "/"},
                        {"device": "data", "type": "xfs", "mount": "/data", "label": "data"},
                        {"device": "srv", "type": "ext4", "mount": "/srv"}]}


def planned():
    return pipeline.build_plan(NativeDriver(KEPT).layout(), DISKS)


def line_of(text, needle):
    (line,) = [ln for ln in text.splitlines() if needle in ln]
    return line


def test_the_printed_plan_says_kept_on_every_kept_line():
    text = render.plan_text(planned())
    assert "kept" in line_of(text, "/dev/vda3  ")                # the kept partition
    assert "xfs /data [data] (kept: not re-created)" in line_of(text, "/dev/vda3  ")
    assert "kept" in line_of(text, "/dev/vda4  ")
    assert "kept" in line_of(text, "VG vg0  ")
    assert "kept" in line_of(text, "/dev/vg0/srv  ")
    assert "ext4 /srv (kept: not re-created)" in line_of(text, "/dev/vg0/srv  ")
    # what is made anew does not say so
    assert "kept" not in line_of(text, "/dev/vda2  ")
    # the steps: the kept partition's does not read like a new one
    assert "[partition] keep partition /dev/vda3 1GiB custom as it is" in text
    assert "[partition] partition /dev/vda2 1GiB linux" in text
    assert "partition table on /dev/vda edited: partitions [3, 4] kept" in text


def test_the_json_plan_says_kept_on_partitions_volumes_and_filesystems():
    layout = json.loads(render.plan_json(planned()))["layout"]
    parts = {p["id"]: p["keep"] for p in layout["disks"][0]["partitions"]}
    assert parts == {"bios": False, "root": False, "data": True, "pv": True}
    (vg,) = layout["volume_groups"]
    assert vg["keep"] is True and [lv["keep"] for lv in vg["logical_volumes"]] == [True]
    assert {fs["id"]: fs["keep"] for fs in layout["filesystems"]} == {
        "root": False, "data": True, "srv": True}
