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
    return initramfs_policy.choose(NativeDriver(doc).layout(), list(wwids))


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
    ("two-disk-raid-lvm.json", "the layout has md RAID and LVM"),
    ("uefi.json", "the layout has LVM"),
    ("encrypted-raid1-lvm.json", "the layout has md RAID and LVM and encryption")])
def test_md_lvm_or_encryption_anywhere_rebuilds(sample, why):
    import json
    import pathlib
    doc = json.loads((pathlib.Path(__file__).resolve().parents[3] / "samples" / sample)
                     .read_text())
    assert choose(doc) == ("rebuild", why)
