"""When the bootloader step keeps the image's initramfs (plan/initramfs_policy.py): only when
nothing this run made has to be in it and / is the image's own filesystem."""

import copy

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.plan import initramfs_policy

PLAIN = {
    "version": 1,
    "disks": [{"id": "d0", "match": {"name": "/dev/vda"}, "partitions": [
        {"id": "bios", "size": "1MiB", "type": "bios_grub"},
        {"id": "root", "size": "remaining"}]}],
    "filesystems": [{"device": "root", "type": "ext4", "mount": "/"}],
    "images": [{"uri": "http://h/root.ext4.zst", "format": "raw", "target": "root",
                "checksum": "sha256:" + "a" * 64}],
    "bootloader": {"boot_mode": "bios"},
}


def choose(doc, wwids=()):
    return initramfs_policy.choose(NativeDriver(doc).layout(), list(wwids))[:2]


def needs(doc):
    return initramfs_policy.choose(NativeDriver(doc).layout(), [])[2]


def test_the_images_own_filesystem_on_a_plain_partition_keeps_its_initramfs():
    assert choose(PLAIN) == ("keep", "/ is the image's own filesystem on a plain device")


def test_a_qcow2_filesystem_image_too():
    doc = copy.deepcopy(PLAIN)
    doc["images"][0].update(format="qcow2", uri="http://h/root.qcow2")
    assert choose(doc)[0] == "keep"


def test_asked_to_rebuild_it_rebuilds():
    doc = copy.deepcopy(PLAIN)
    doc["bootloader"]["initramfs"] = "rebuild"
    assert choose(doc) == ("rebuild", "asked for (bootloader.initramfs)")


def test_a_tar_image_unpacked_into_a_filesystem_of_the_layouts_choosing_rebuilds():
    doc = copy.deepcopy(PLAIN)
    doc["images"] = [{"uri": "http://h/root.tar.zst", "format": "tar", "target": "/",
                      "checksum": "sha256:" + "a" * 64}]
    assert choose(doc) == ("rebuild", "/ is not a filesystem image written as it is")


def test_an_image_on_another_filesystem_than_the_root_rebuilds():
    doc = copy.deepcopy(PLAIN)
    doc["disks"][0]["partitions"].insert(1, {"id": "srv", "size": "1GiB"})
    doc["filesystems"].append({"device": "srv", "type": "ext4", "mount": "/srv"})
    doc["images"][0]["target"] = "srv"
    doc["images"].append({"uri": "http://h/root.tar.zst", "format": "tar", "target": "/",
                          "checksum": "sha256:" + "a" * 64})
    assert choose(doc)[0] == "rebuild"


def test_multipath_disks_rebuild():
    assert choose(PLAIN, ["3600a0b80001"]) == ("rebuild", "the layout has multipath")


@pytest.mark.parametrize("sample,why", [
    ("two-disk-raid-lvm.json", "/ is not a filesystem image written as it is"),
    ("encrypted-raid1-lvm.json", "the layout has encryption")])
def test_encryption_or_a_tar_root_on_md_and_lvm_rebuilds(sample, why):
    import json
    import pathlib
    doc = json.loads((pathlib.Path(__file__).resolve().parents[3] / "samples" / sample)
                     .read_text())
    doc["images"] = [{"uri": "http://h/root.tar.zst", "format": "tar", "target": "/",
                      "checksum": "sha256:" + "a" * 64}]
    assert choose(doc) == ("rebuild", why)


def test_the_images_filesystem_on_md_and_lvm_is_kept_if_its_initramfs_has_the_tools():
    # as ironic-python-agent's software RAID: the image's initramfs assembles and activates
    # what it finds; the bootloader step lists it for mdadm and lvm first
    doc = copy.deepcopy(PLAIN)
    doc["disks"][0]["partitions"][1]["type"] = "raid"
    doc["disks"].append({"id": "d1", "match": {"name": "/dev/vdb"}, "partitions": [
        {"id": "bios1", "size": "1MiB", "type": "bios_grub"},
        {"id": "root1", "size": "remaining", "type": "raid"}]})
    doc["raids"] = [{"id": "md", "level": 1, "members": ["root", "root1"]}]
    doc["volume_groups"] = [{"id": "vg", "name": "os", "pvs": ["md"], "logical_volumes": [
        {"id": "lv", "name": "root", "size": "remaining"}]}]
    doc["filesystems"][0]["device"] = "lv"
    doc["images"][0]["target"] = "lv"
    assert choose(doc)[0] == "keep"
    assert needs(doc) == ["mdadm", "lvm"]
    assert needs(PLAIN) == []


def test_a_root_on_bcache_rebuilds_and_bcache_elsewhere_keeps_it():
    """The image's initramfs may lack bcache-tools' hook: rebuilt for a / on bcache; a bcache
    device mounted elsewhere is registered by the installed root's own udev rule."""
    doc = copy.deepcopy(PLAIN)
    doc["disks"].append({"id": "d1", "match": {"name": "/dev/vdb"}})
    doc["disks"].append({"id": "d2", "match": {"name": "/dev/vdc"}})
    doc["bcache"] = [{"id": "bc", "backing_device": "d1", "cache_device": "d2"}]
    doc["filesystems"].append({"device": "bc", "type": "xfs", "mount": "/srv"})
    assert choose(doc)[0] == "keep"
    doc["filesystems"] = [{"device": "bc", "type": "ext4", "mount": "/"}]
    doc["images"][0]["target"] = "bc"
    assert choose(doc) == ("rebuild", "the layout has / on bcache")
