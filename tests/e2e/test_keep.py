"""A pet re-installed under UEFI (issue 54): a layout with an ESP, a new / and a data volume
group is provisioned, data is written into the data LV and a marker into the ESP, whose grub is
then removed; the same layout with the ESP and the volume group kept is provisioned again. The
data's checksum and the ESP's filesystem are unchanged, / is written anew, the kept ESP holds a
new grub, and OVMF (with empty NVRAM, so by the removable path) boots the disk to the test OS.

Then md arrays: one kept with its data (and refused when the layout names another array), one
kept with its own partition table.

Outside CI (tox -e e2e-keep, ~15 min; the pet: two provisionings with the test OS's ext4
written as it is, so its own initramfs is kept, and one boot)."""

import copy
import json

import pytest

from tests.vmbench import FileServer, testos

pytestmark = pytest.mark.keep

MARKER = r"PROVISION-BOOT-OK cd=(\S+)"
ESP_MNT = "/mnt/esp"


def layout(image_url, checksum):
    return {
        "version": 1,
        "disks": [{"id": "disk0", "match": {"serial": "disk0"}, "partitions": [
            {"id": "esp", "size": "256MiB", "type": "esp", "name": "EFI"},
            {"id": "root", "size": "1536MiB", "type": "linux", "name": "root"},
            {"id": "pv0", "size": "remaining", "type": "lvm", "name": "data"}]}],
        "volume_groups": [{"id": "vg-data", "name": "data", "pvs": ["pv0"],
                           "logical_volumes": [{"id": "lv-data", "name": "data",
                                                "size": "512MiB"}]}],
        "filesystems": [
            {"device": "esp", "type": "vfat", "mount": "/boot/efi", "label": "EFI"},
            {"device": "root", "type": "ext4", "mount": "/", "label": "root"},
            {"device": "lv-data", "type": "ext4", "mount": "/srv/data", "label": "data"}],
        "images": [{"uri": image_url, "format": "raw", "target": "root", "checksum": checksum}],
        "bootloader": {"boot_mode": "uefi", "kernel_params": "console=ttyS0"},
        "configdrive": {"format": "config-2", "meta_data": {"uuid": "keep-e2e"}},
    }


def kept(doc):
    """The same layout re-provisioned: the ESP, the data PV and its volume group kept."""
    doc = copy.deepcopy(doc)
    for part in doc["disks"][0]["partitions"]:
        if part["id"] in ("esp", "pv0"):
            part["keep"] = True
    doc["volume_groups"][0]["keep"] = True
    return doc


def _prepare_for_the_second_run(vm):
    """Data into the LV (its checksum kept on the ramdisk), a marker on /, and on the ESP a
    marker while its grub goes: only a run that installs grub into the kept ESP brings it
    back."""
    vm.ssh("mkdir -p /mnt/d /mnt/r " + ESP_MNT + " && mount /dev/data/data /mnt/d && "
           "head -c 16M /dev/urandom > /mnt/d/kept.bin && "
           "(cd /mnt/d && sha256sum kept.bin) > /tmp/kept.sha256 && umount /mnt/d && "
           "mount /dev/vda2 /mnt/r && touch /mnt/r/old-os && umount /mnt/r && "
           f"mount /dev/vda1 {ESP_MNT} && test -d {ESP_MNT}/EFI/BOOT && "
           f"echo pet > {ESP_MNT}/KEPT-MARK && rm -rf {ESP_MNT}/EFI && umount {ESP_MNT}")


def _check_the_second_run(vm, before):
    after = vm.blkid()
    # the ESP and the data LV are the same filesystems; / was written anew
    assert after["/dev/vda1"]["UUID"] == before["/dev/vda1"]["UUID"]
    assert after["/dev/mapper/data-data"]["UUID"] == before["/dev/mapper/data-data"]["UUID"]
    vm.ssh("mount /dev/data/data /mnt/d && cd /mnt/d && sha256sum -c /tmp/kept.sha256 && "
           "cd / && umount /mnt/d")
    vm.ssh(f"mount /dev/vda1 {ESP_MNT} && mount /dev/vda2 /mnt/r")
    try:
        assert vm.read_text(f"{ESP_MNT}/KEPT-MARK").strip() == "pet"
        assert vm.exists(f"{ESP_MNT}/EFI/BOOT/BOOTX64.EFI"), "no grub in the kept ESP"
        assert not vm.exists("/mnt/r/old-os"), "/ was not written anew"
        fstab = vm.read_text("/mnt/r/etc/fstab")
        assert "/srv/data" in fstab and "/boot/efi" in fstab, fstab
    finally:
        vm.ssh(f"umount {ESP_MNT} /mnt/r")


def test_uefi_pet_reprovisioned_keeps_its_data_lv_and_its_esp_and_boots(make_vm):
    image = testos.ext4_zst()
    with FileServer(image.parent) as srv:
        doc = layout(srv.guest_url(image.name), testos.checksum(image))
        vm = make_vm(disks=1, disk_size="4G", firmware="uefi", keep_disks=True,
                     serials=["disk0"])
        run = vm.provision(doc, ["--debug"])
        assert run.returncode == 0, run.stderr[-3000:] + "\n" + run.log[-4000:]
        _prepare_for_the_second_run(vm)
        before = vm.blkid()
        dry = vm.provision(kept(doc), ["--dry_run", "--plan_format", "json"])
        assert dry.returncode == 0, dry.stderr[-3000:]
        steps = json.loads(dry.stdout)["steps"]
        # no mkfs at all: / is the image's ext4, the ESP and the data LV are kept
        assert [s["args"]["device"] for s in steps if s["kind"] == "mkfs"] == []
        assert [s["args"]["device"] for s in steps if s["kind"] == "write_image"] == \
            ["/dev/vda2"]
        assert [s["args"]["device"] for s in steps
                if s["kind"] == "partition" and s["args"]["keep"]] == ["/dev/vda1", "/dev/vda3"]
        run = vm.provision(kept(doc), ["--debug"])
        assert run.returncode == 0, run.stderr[-3000:] + "\n" + run.log[-4000:]
        assert "keep volume group data" in run.log
        _check_the_second_run(vm, before)
        vm.stop()
    booted = make_vm(disk_images=list(vm.disk_images), boot="disk", firmware="uefi")
    booted.wait_console(MARKER, timeout=1800)
    vm.keep_disks = False


def array_layout(keep):
    """An md RAID1 across two disks holding /srv, and a data partition beside it: made, then
    kept (the array assembled from its kept members, the partition kept in place and its
    contents wiped for a new filesystem). No OS image: nothing here needs one."""
    kept = {"keep": True} if keep else {}
    return {
        "version": 1,
        "disks": [{"id": "a", "match": {"serial": "disk0"}, "partitions": [
            {"id": "root", "size": "512MiB"},
            {"id": "m0", "size": "512MiB", "type": "raid", **kept},
            {"id": "w", "size": "256MiB", **({"keep": True, "wipe": "superblock"}
                                             if keep else {})}]},
            {"id": "b", "match": {"serial": "disk1"}, "partitions": [
                {"id": "m1", "size": "512MiB", "type": "raid", **kept}]}],
        "raids": [{"id": "md", "name": "srv", "level": 1, "members": ["m0", "m1"], **kept}],
        "filesystems": [{"device": "root", "type": "ext4", "mount": "/"},
                        {"device": "md", "type": "ext4", "mount": "/srv"},
                        {"device": "w", "type": "ext4", "mount": "/w"}],
        "bootloader": {"type": "none"},
    }


def test_a_kept_md_array_is_assembled_with_its_data_and_a_wiped_kept_partition_made_anew(
        make_vm):
    vm = make_vm(disks=2, disk_size="2G", serials=["disk0", "disk1"])
    run = vm.provision(array_layout(False), ["--debug"])
    assert run.returncode == 0, run.stderr[-3000:] + "\n" + run.log[-4000:]
    _seed(vm, kept="/dev/md/srv", renewed="/dev/vda3")
    array_uuid = "mdadm --detail --export /dev/md/srv | grep '^MD_UUID='"
    before, uuid_before = _fs_uuids(vm), vm.ssh(array_uuid).stdout.strip()
    tables_before = _places(vm)
    # an array kept under another name is another array: refused before the first write
    wrong = array_layout(True)
    wrong["raids"][0]["name"] = "data"
    refused = vm.provision(wrong, ["--debug"])
    assert refused.returncode == 3, refused.stderr[-3000:]
    assert "is a member of array srv, the layout keeps data" in refused.stderr
    assert vm.ssh(array_uuid).stdout.strip() == uuid_before
    run = vm.provision(array_layout(True), ["--debug"])
    assert run.returncode == 0, run.stderr[-3000:] + "\n" + run.log[-4000:]
    assert "mdadm --assemble /dev/md/srv --run" in run.log
    assert "mdadm --create" not in run.log
    after = _fs_uuids(vm)
    assert vm.ssh(array_uuid).stdout.strip() == uuid_before
    assert after["/dev/md/srv"] == before["/dev/md/srv"]
    # the wiped partition: the same place, a new filesystem, nothing of the old one
    assert after["/dev/vda3"] != before["/dev/vda3"]
    _check_seeded(vm, kept="/dev/md/srv", renewed="/dev/vda3")
    assert _places(vm) == tables_before


def _seed(vm, kept, renewed):
    """16 MiB of random data on the filesystem the re-provision keeps (its sha256 kept in the
    ramdisk) and a file on the one it makes anew."""
    vm.ssh(f"mkdir -p /mnt/s /mnt/v && mount {kept} /mnt/s && "
           "head -c 16M /dev/urandom > /mnt/s/kept.bin && "
           "(cd /mnt/s && sha256sum kept.bin) > /tmp/kept.sha256 && umount /mnt/s && "
           f"mount {renewed} /mnt/v && touch /mnt/v/old && umount /mnt/v")


def _check_seeded(vm, kept, renewed):
    """The kept data reads back with its sha256; the new filesystem has nothing of the old."""
    vm.ssh(f"mount {kept} /mnt/s && cd /mnt/s && sha256sum -c /tmp/kept.sha256 && "
           f"cd / && umount /mnt/s && mount {renewed} /mnt/v")
    try:
        assert not vm.exists("/mnt/v/old")
    finally:
        vm.ssh("umount /mnt/v")


def _fs_uuids(vm):
    return {dev: vm.ssh(f"blkid -p -o value -s UUID {dev}").stdout.strip()
            for dev in ("/dev/md/srv", "/dev/vda3")}


def _places(vm):
    """Every partition's (node, start, size) on both disks."""
    tables = [json.loads(vm.ssh(f"sfdisk --json {d}").stdout)["partitiontable"]
              for d in ("/dev/vda", "/dev/vdb")]
    return [(p["node"], p["start"], p["size"]) for t in tables for p in t["partitions"]]


def partitioned_array_layout(keep):
    """An md RAID1 with a partition table of its own (curtin's partition-existing-raid): made,
    then kept with its first partition, the second made anew."""
    kept = {"keep": True} if keep else {}
    return {
        "version": 1,
        "disks": [{"id": "a", "match": {"serial": "disk0"}, "partitions": [
            {"id": "root", "size": "512MiB"},
            {"id": "m0", "size": "768MiB", "type": "raid", **kept}]},
            {"id": "b", "match": {"serial": "disk1"}, "partitions": [
                {"id": "m1", "size": "768MiB", "type": "raid", **kept}]}],
        "raids": [{"id": "md", "name": "data", "level": 1, "members": ["m0", "m1"], **kept,
                   "partitions": [{"id": "srv", "size": "256MiB", **kept},
                                  {"id": "var", "size": "remaining"}]}],
        "filesystems": [{"device": "root", "type": "ext4", "mount": "/"},
                        {"device": "srv", "type": "ext4", "mount": "/srv"},
                        {"device": "var", "type": "ext4", "mount": "/var"}],
        "bootloader": {"type": "none"},
    }


def test_a_kept_array_keeps_its_partition_table_and_the_kept_partition_in_it(make_vm):
    vm = make_vm(disks=2, disk_size="2G", serials=["disk0", "disk1"])
    run = vm.provision(partitioned_array_layout(False), ["--debug"])
    assert run.returncode == 0, run.stderr[-3000:] + "\n" + run.log[-4000:]
    _seed(vm, kept="/dev/md/data1", renewed="/dev/md/data2")
    uuid = "blkid -p -o value -s UUID "
    srv, var = (vm.ssh(uuid + d).stdout.strip() for d in ("/dev/md/data1", "/dev/md/data2"))
    run = vm.provision(partitioned_array_layout(True), ["--debug"])
    assert run.returncode == 0, run.stderr[-3000:] + "\n" + run.log[-4000:]
    assert "mdadm --create" not in run.log
    assert vm.ssh(uuid + "/dev/md/data1").stdout.strip() == srv
    assert vm.ssh(uuid + "/dev/md/data2").stdout.strip() not in ("", var)
    _check_seeded(vm, kept="/dev/md/data1", renewed="/dev/md/data2")
