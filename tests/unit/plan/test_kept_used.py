"""Every kept thing used as it is: a kept filesystem that carries /, /boot/efi or any mount
point is mounted there before anything is written into the target (the image, fstab, the
bootloader), and is never re-created. Before, a kept root or ESP was left unmounted: the tar
image, fstab and grub went into the ramdisk's memory under the bare target directory."""

import json

import pytest

from provision_agent.data_drivers.nailgun.driver import NailgunDriver
from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline, render
from tests.unit.helpers import inventory

DISKS = inv_mod.from_document(inventory("three-disks"))
TAR = {"uri": "http://h/root.tar.gz", "format": "tar", "target": "/",
       "checksum": "sha256:" + "a" * 64}


def plan(doc):
    return json.loads(render.plan_json(pipeline.build_plan(NativeDriver(doc).layout(), DISKS)))


def kinds_on(steps, device):
    return [s["kind"] for s in steps if s["args"].get("device") == device]


def test_a_kept_root_and_esp_are_mounted_before_the_image_fstab_and_grub():
    """curtin's re-use of an existing ESP and root: both kept, the new system unpacked into
    the kept root, the kept ESP given the bootloader."""
    doc = {"version": 1,
           "disks": [{"id": "d", "match": {"name": "vda"}, "partitions": [
               {"id": "esp", "size": "200MiB", "type": "esp", "keep": True},
               {"id": "root", "size": "remaining", "keep": True}]}],
           "filesystems": [{"device": "esp", "type": "vfat", "mount": "/boot/efi"},
                           {"device": "root", "type": "ext4", "mount": "/"}],
           "images": [TAR], "bootloader": {"boot_mode": "uefi"}}
    steps = plan(doc)["steps"]
    kinds = [s["kind"] for s in steps]
    assert kinds_on(steps, "/dev/vda2") == ["partition", "mount"]
    assert kinds_on(steps, "/dev/vda1") == ["partition", "mount"]
    mounts = [(s["args"]["device"], s["args"]["mount_point"]) for s in steps
              if s["kind"] == "mount"]
    assert mounts == [("/dev/vda2", "/"), ("/dev/vda1", "/boot/efi")]
    last_mount = max(i for i, k in enumerate(kinds) if k == "mount")
    assert last_mount < kinds.index("write_image") < kinds.index("fstab") \
        < kinds.index("bootloader") < kinds.index("umount")
    assert steps[kinds.index("umount")]["args"]["mount_points"] == ["/boot/efi", "/"]
    assert not [s for s in steps if s["kind"] == "mkfs"]


def test_a_kept_root_on_a_kept_volume_group_is_mounted_under_which_new_ones_go():
    """/ on a logical volume of a kept volume group, /home new on another disk: / first."""
    doc = {"version": 1,
           "disks": [{"id": "d", "match": {"name": "vda"}, "partitions": [
               {"id": "bios", "size": "1MiB", "type": "bios_grub"},
               {"id": "pv", "size": "remaining", "type": "lvm", "keep": True}]},
               {"id": "e", "match": {"name": "vdb"}, "partitions": [
                   {"id": "home", "size": "remaining"}]}],
           "volume_groups": [{"id": "vg", "name": "sys", "pvs": ["pv"], "keep": True,
                              "logical_volumes": [{"id": "lvroot", "name": "root",
                                                   "size": "remaining"}]}],
           "filesystems": [{"device": "lvroot", "type": "xfs", "mount": "/"},
                           {"device": "home", "type": "ext4", "mount": "/home"}],
           "images": [TAR]}
    steps = plan(doc)["steps"]
    mounts = [(s["args"]["device"], s["args"]["mount_point"]) for s in steps
              if s["kind"] == "mount"]
    assert mounts == [("/dev/sys/root", "/"), ("/dev/vdb1", "/home")]
    assert "kept" in next(s for s in steps if s["kind"] == "mount")["description"]
    assert kinds_on(steps, "/dev/sys/root") == ["mount"]


def test_a_kept_filesystem_without_a_mount_point_is_not_mounted():
    doc = {"version": 1,
           "disks": [{"id": "d", "match": {"name": "vda"}, "partitions": [
               {"id": "root", "size": "1GiB"}, {"id": "eph", "size": "1GiB", "keep": True}]}],
           "filesystems": [{"device": "root", "type": "ext4", "mount": "/"},
                           {"device": "eph", "type": "ext4", "label": "ephemeral0"}],
           "images": [TAR]}
    assert kinds_on(plan(doc)["steps"], "/dev/vda2") == ["partition"]


@pytest.mark.parametrize("space", ["partition", "vg"])
def test_a_kept_fuel_root_without_a_file_system_is_refused_with_its_place(space):
    vol = {"type": "partition", "mount": "/", "size": 3000, "keep_data": True}
    spaces = [{"type": "disk", "id": "vda", "name": "vda", "size": 10240, "volumes": [
        {"type": "boot", "size": 300}, vol]}]
    if space == "vg":
        vol.update(type="pv", vg="os")
        del vol["mount"]
        spaces.append({"type": "vg", "id": "os", "volumes": [
            {"type": "lv", "name": "root", "mount": "/", "size": 2800}]})
    doc = {"ks_meta": {"pm_data": {"ks_spaces": spaces}}}
    with pytest.raises(InputError) as exc:
        NailgunDriver(doc).layout()
    text = str(exc.value)
    assert "keep_data keeps the filesystem mounted at /" in text
    assert ("ks_spaces[1] (os) volumes[0]" if space == "vg" else "ks_spaces[0] (vda) volumes[1]") \
        in text
