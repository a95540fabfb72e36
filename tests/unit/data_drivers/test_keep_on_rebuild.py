"""`"keep": "on_rebuild"`: the ironic data driver keeps it on a rebuild (the document's
`rebuild`), makes it anew on a first deploy; given to provision directly it is refused, since
nothing there says which it is."""

import copy
import json

import pytest

from provision_agent.data_drivers.ironic import IronicDriver
from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError
from provision_agent.plan import inventory, pipeline, render

LAYOUT = {"version": 1,
          "disks": [{"id": "d", "match": {"serial": "s1"}, "partitions": [
              {"id": "bios", "size": "1MiB", "type": "bios_grub"},
              {"id": "root", "size": "2GiB"},
              {"id": "data", "size": "1GiB", "keep": "on_rebuild"},
              {"id": "pv", "size": "remaining", "type": "lvm", "keep": "on_rebuild"}]}],
          "volume_groups": [{"id": "vg", "name": "vg0", "pvs": ["pv"], "keep": "on_rebuild",
                             "logical_volumes": [{"id": "srv", "name": "srv", "size": "1GiB"}]}],
          "filesystems": [{"device": "root", "type": "ext4", "mount": "/"},
                          {"device": "data", "type": "xfs", "mount": "/data"},
                          {"device": "srv", "type": "ext4", "mount": "/srv"}]}
DISKS = [{"name": "/dev/vda", "size": 10 << 30, "serial": "s1"}]


def plan(rebuild):
    doc = {"node_uuid": "u", "boot_mode": "bios", "rebuild": rebuild,
           "properties": {"root_device": {"serial": "s1"}},
           "instance_info": {"image_source": "http://h/img.raw", "image_disk_format": "raw",
                             "image_os_hash_algo": "sha256", "image_os_hash_value": "a" * 64,
                             "root_gb": 2},
           "layout": copy.deepcopy(LAYOUT)}
    planned = pipeline.build_plan(IronicDriver(doc).layout(), inventory.from_document(
        {"disks": DISKS}))
    return json.loads(render.plan_json(planned))


def test_a_rebuild_keeps_them():
    p = plan(True)
    kinds = [s["kind"] for s in p["steps"]]
    assert [s["args"]["keep"] for s in p["steps"] if s["kind"] == "wipe"] == [[3, 4]]
    assert "vg_activate" in kinds and "vg_create" not in kinds
    assert [s["args"]["device"] for s in p["steps"] if s["kind"] == "mkfs"] == []
    assert any("a rebuild of the same instance" in w for w in p["warnings"])


def test_a_first_deploy_makes_them_anew():
    p = plan(False)
    kinds = [s["kind"] for s in p["steps"]]
    assert [s["args"]["keep"] for s in p["steps"] if s["kind"] == "wipe"] == [[]]
    assert "vg_create" in kinds and "vg_activate" not in kinds
    assert sorted(s["args"]["device"] for s in p["steps"] if s["kind"] == "mkfs") == [
        "/dev/vda3", "/dev/vg0/srv"]
    assert any("a first deploy" in w for w in p["warnings"])


def test_given_to_provision_directly_it_is_refused():
    with pytest.raises(InputError) as exc:
        NativeDriver(copy.deepcopy(LAYOUT)).layout()
    text = str(exc.value)
    assert "$.disks[0].partitions[2].keep: \"on_rebuild\" is decided by Ironic's deploy" in text
    assert "$.volume_groups[0].keep" in text
