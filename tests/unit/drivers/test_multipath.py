"""Multipath disks from inventory to plan: one disk per WWID, hints that name any
path find it, a layout naming one path is refused, partitions are the maps kpartx makes, and
the installed system learns the WWID. The VM proof is tests/e2e/test_multipath.py."""

import json

import pytest

from provision_agent.data_drivers.nailgun.driver import NailgunDriver
from provision_agent.data_drivers.native import NativeDriver
from provision_agent.drivers import blockinfo, md, multipath, udev, wipe
from provision_agent.errors import MachineMismatch
from provision_agent.plan import inventory, pipeline
from provision_agent.plan.devnames import partition_device, partition_number
from tests.unit.data_drivers.nailgun.test_driver import fuel
from tests.unit.fakes import FakeRunner

WWID = "3600508b400105e210000900000490000"
PATHS = [{"name": "/dev/sda", "by_path": "/dev/disk/by-path/pci-0000:03:00.0-sas-0x5000c5-lun-0",
          "hctl": "0:0:0:0"},
         {"name": "/dev/sdb", "by_path": "/dev/disk/by-path/pci-0000:04:00.0-sas-0x5000c6-lun-0",
          "hctl": "1:0:0:0"}]
MPATH = {"name": "/dev/mapper/mpatha", "size": 8 << 30, "serial": "SN-LUN0",
         "wwn": "0x600508b400105e21", "rotational": False,
         "by_id": [f"/dev/disk/by-id/dm-uuid-mpath-{WWID}",
                   "/dev/disk/by-id/wwn-0x600508b400105e21"],
         "multipath": {"wwid": WWID, "dm": "/dev/dm-0", "paths": PATHS}}
PLAIN = {"name": "/dev/vda", "size": 16 << 30, "serial": "disk1"}
NVME = {"name": "/dev/nvme0n1", "size": 4 << 30, "serial": "nvme0"}


def disks(*extra):
    return inventory.from_document({"disks": [MPATH, PLAIN, NVME, *extra]})


def layout(mp_match):
    return {
        "version": 1,
        "disks": [
            {"id": "mp", "match": mp_match, "partitions": [
                {"id": "bios0", "size": "1MiB", "type": "bios_grub"},
                {"id": "boot0", "size": "256MiB", "type": "raid"},
                {"id": "os0", "size": "remaining", "type": "lvm"}]},
            {"id": "plain", "match": {"serial": "disk1"}, "partitions": [
                {"id": "bios1", "size": "1MiB", "type": "bios_grub"},
                {"id": "boot1", "size": "256MiB", "type": "raid"}]},
            {"id": "nv", "match": {"serial": "nvme0"}, "partitions": [
                {"id": "nv1", "size": "512MiB", "type": "linux"}]}],
        "raids": [{"id": "md-boot", "name": "boot", "level": 1, "members": ["boot0", "boot1"],
                   "metadata": "1.0"}],
        "volume_groups": [{"id": "vg-os", "name": "os", "pvs": ["os0"], "logical_volumes": [
            {"id": "lv-root", "name": "root", "size": "remaining"}]}],
        "filesystems": [
            {"device": "md-boot", "type": "ext2", "mount": "/boot"},
            {"device": "lv-root", "type": "ext4", "mount": "/"},
            {"device": "nv1", "type": "ext4", "mount": "/srv"}],
        "bootloader": {"boot_mode": "bios"},
        "images": [{"uri": "http://10.0.2.2/root.tar.zst", "format": "tar", "target": "/",
                    "allow_no_checksum": True}],
    }


def build(doc, inv=None):
    return pipeline.build_plan(NativeDriver(doc).layout(), inv or disks())


@pytest.mark.parametrize("hints", [
    {"wwn": "0x600508b400105e21"}, {"serial": "SN-LUN0"}, {"name": "/dev/mapper/mpatha"},
    {"name": "/dev/dm-0"}, {"by_path": PATHS[0]["by_path"]}, {"by_path": PATHS[1]["by_path"]},
    {"hctl": "1:0:0:0"}, {"by_id": f"dm-uuid-mpath-{WWID}"}, {"size": 8},
])
def test_any_hint_for_the_lun_or_one_of_its_paths_finds_the_multipath_disk(hints):
    found = inventory.match(disks(), hints)
    assert [d["name"] for d in found] == ["/dev/mapper/mpatha"]


def test_paths_listed_beside_their_map_are_not_disks_of_their_own():
    """fuel-agent's block-device listing (and an older IPA inventory) has sda and sdb next to
    the dm device, with the same by-id links: without this, 3 disks matched one link."""
    link = "/dev/disk/by-id/scsi-SATA_VBOX_HARDDISK_VB69050467-b385c7cd"
    mp = dict(MPATH, by_id=MPATH["by_id"] + [link])
    paths = [dict(name=p["name"], size=8 << 30, by_id=[link], by_path=p["by_path"]) for p in PATHS]
    found = inventory.from_document({"disks": paths + [mp, PLAIN]})
    assert [d["name"] for d in found] == ["/dev/mapper/mpatha", "/dev/vda"]
    assert [d["name"] for d in inventory.match(found, {"by_id": link})] == ["/dev/mapper/mpatha"]


def test_partitions_are_the_maps_kpartx_makes_named_by_their_dm_uuid():
    res = build(layout({"wwn": "0x600508b400105e21"}))
    parts = [s.args["device"] for s in res.steps if s.kind == "partition"]
    assert parts[:3] == [f"/dev/disk/by-id/dm-uuid-part{n}-mpath-{WWID}" for n in (1, 2, 3)]
    assert parts[3:] == ["/dev/vda1", "/dev/vda2", "/dev/nvme0n1p1"]
    assert {s.args["disk"] for s in res.steps if s.kind == "wipe"} == \
        {"/dev/mapper/mpatha", "/dev/vda", "/dev/nvme0n1"}
    pv = next(s for s in res.steps if s.kind == "pv_create")
    assert pv.args["device"] == f"/dev/disk/by-id/dm-uuid-part3-mpath-{WWID}"
    md = next(s for s in res.steps if s.kind == "md_create")
    assert md.args["members"] == [f"/dev/disk/by-id/dm-uuid-part2-mpath-{WWID}", "/dev/vda2"]
    boot = next(s for s in res.steps if s.kind == "bootloader")
    assert boot.args["targets"] == ["/dev/mapper/mpatha", "/dev/vda"]


def test_the_installed_system_is_told_the_wwid_before_its_initramfs_is_made():
    res = build(layout({"serial": "SN-LUN0"}))
    kinds = [s.kind for s in res.steps]
    step = res.steps[kinds.index("multipath_conf")]
    assert step.args == {"wwids": [WWID]}
    assert kinds.index("multipath_conf") < kinds.index("bootloader")
    plain = layout({"serial": "SN-LUN0"})
    plain["disks"] = plain["disks"][1:]
    plain["raids"], plain["volume_groups"] = [], []
    plain["filesystems"] = [{"device": "nv1", "type": "ext4", "mount": "/"}]
    plain["bootloader"]["targets"] = ["plain"]      # the disk with a bios_grub (issue 56)
    assert "multipath_conf" not in [s.kind for s in build(plain).steps]


@pytest.mark.parametrize("path", ["/dev/sda", "sdb"])
def test_a_layout_naming_one_path_is_a_machine_mismatch_that_names_the_map(path):
    with pytest.raises(MachineMismatch) as err:
        build(layout({"name": path}))
    text = str(err.value.problems[0])
    assert f"/dev/{path.removeprefix('/dev/')} is one path of multipath disk /dev/mapper/mpatha" \
        in text
    assert "/dev/sda, /dev/sdb" in text


def test_fuels_multipath_document_plans_onto_the_map():
    """fuel-agent's own MPATH_DISK_KS_SPACES: a disk named mapper/12312 found by by-id links
    that its two paths share, next to a plain disk."""
    link = "/dev/disk/by-id/scsi-SATA_VBOX_HARDDISK_VB69050467-b385c7cd"
    mp = dict(MPATH, name="/dev/mapper/12312", by_id=[link, "/dev/disk/by-id/wwn-fake_wwn_1",
                                                     "/dev/disk/by-id/dm-uuid-mpath-fake_wwn_1"],
              multipath={"wwid": "fake_wwn_1", "dm": "/dev/dm-0", "paths": PATHS})
    paths = [{"name": p["name"], "size": 8 << 30, "by_id": [link, "/dev/disk/by-id/wwn-fake_wwn_1"],
              "by_path": p["by_path"]} for p in PATHS]
    sdc = {"name": "/dev/sdc", "size": 8 << 30,
           "by_id": ["/dev/disk/by-id/scsi-SATA_VBOX_HARDDISK_VB69050467-fffff"]}
    inv = inventory.from_document({"disks": paths + [mp, sdc]})
    spaces = [
        {"name": "mapper/12312", "id": "dm-0", "type": "disk", "size": 8192,
         "extra": ["disk/by-id/scsi-SATA_VBOX_HARDDISK_VB69050467-b385c7cd",
                   "disk/by-id/wwn-fake_wwn_1"],
         "volumes": [{"type": "boot", "size": 300},
                     {"mount": "/boot", "size": 200, "type": "partition", "file_system": "ext2"},
                     {"mount": "/", "size": 4000, "type": "partition", "file_system": "ext4"}]},
        {"name": "sdc", "id": "sdc", "type": "disk", "size": 8192,
         "extra": ["disk/by-id/scsi-SATA_VBOX_HARDDISK_VB69050467-fffff"],
         "volumes": [{"mount": "/home", "size": 200, "type": "partition",
                      "file_system": "ext4"}]}]
    res = pipeline.build_plan(NailgunDriver(fuel(spaces)).layout(), inv)
    assert sorted(res.resolved.devices[d] for d in res.resolved.disks) == \
        ["/dev/mapper/12312", "/dev/sdc"]
    image = next(s for s in res.steps if s.kind == "write_image")
    assert image.args["device"] == "/dev/disk/by-id/dm-uuid-part4-mpath-fake_wwn_1"   # "/"
    assert next(s for s in res.steps if s.kind == "multipath_conf").args["wwids"] == ["fake_wwn_1"]


def test_partition_names_and_numbers_round_trip():
    base = f"/dev/disk/by-id/dm-uuid-mpath-{WWID}"
    assert partition_device(base, 12) == f"/dev/disk/by-id/dm-uuid-part12-mpath-{WWID}"
    assert partition_number(partition_device(base, 12)) == 12
    assert partition_number("/dev/mapper/mpatha-part3") == 3
    assert partition_device("/dev/nvme0n1", 2) == "/dev/nvme0n1p2"


def test_wwids_file_keeps_what_the_image_had_and_adds_each_wwid_once():
    assert multipath.merge_wwids("", [WWID]).endswith(f"\n/{WWID}/\n")
    existing = "# Multipath wwids, Version : 1.0\n/3600a0b800012/"
    text = multipath.merge_wwids(existing, [WWID, "3600a0b800012", WWID])
    assert text.splitlines()[1:] == ["/3600a0b800012/", f"/{WWID}/"]


def test_disks_under_names_the_map_not_its_paths(tmp_path, monkeypatch):
    """lsblk --inverse lists a map's paths beside it (seen in the VM): the disk a plan names
    is the map."""
    sys_block = tmp_path
    for name, holders in (("sda", ["dm-0"]), ("sdb", ["dm-0"]), ("vda", ["md127"])):
        (sys_block / name / "holders").mkdir(parents=True)
        for h in holders:
            (sys_block / name / "holders" / h).touch()
    monkeypatch.setattr(blockinfo.os.path, "realpath",
                        lambda p: {"/dev/mapper/mpatha": "/dev/dm-0"}.get(p, p))
    listing = {"blockdevices": [{"path": "/dev/sda", "type": "disk"},
                                {"path": "/dev/sdb", "type": "disk"},
                                {"path": "/dev/mapper/mpatha", "type": "mpath"},
                                {"path": "/dev/vda", "type": "disk"},
                                {"path": "/dev/md127", "type": "raid1"}]}
    runner = FakeRunner({"lsblk --json --inverse": json.dumps(listing)})
    assert blockinfo.disks_under(runner, "/dev/md127", sys_block=str(sys_block)) == \
        ["/dev/mapper/mpatha", "/dev/vda"]


def test_wiping_a_multipath_disk_removes_its_partition_maps_before_the_table(monkeypatch):
    tree = {"blockdevices": [{"name": "mpatha", "path": "/dev/mapper/mpatha", "type": "mpath",
                              "children": [
                                  {"name": "mpatha-part1", "path": "/dev/mapper/mpatha-part1",
                                   "type": "part", "fstype": None},
                                  {"name": "mpatha-part2", "path": "/dev/mapper/mpatha-part2",
                                   "type": "part", "fstype": "ext4"}]}]}
    runner = FakeRunner({"lsblk --json --bytes": json.dumps(tree),
                         "pvs": '{"report": [{"pv": []}]}'})
    monkeypatch.setattr(udev.os.path, "realpath", lambda p: "/dev/dm-0")
    monkeypatch.setattr(wipe.os.path, "exists", lambda p: True)
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    wipe.wipe(runner, "/dev/mapper/mpatha")
    lines = runner.lines()
    removes = [ln for ln in lines if ln.startswith("dmsetup remove")]
    assert removes == ["dmsetup remove --retry /dev/mapper/mpatha-part2",
                       "dmsetup remove --retry /dev/mapper/mpatha-part1"]
    assert lines.index(removes[-1]) < lines.index("sgdisk --zap-all /dev/mapper/mpatha")


def test_a_multipath_disk_rereads_through_udev_not_partprobe(monkeypatch):
    monkeypatch.setattr(udev.os.path, "realpath",
                        lambda p: "/dev/dm-3" if "mapper" in p else p)
    runner = FakeRunner()
    udev.reread_partitions(runner, "/dev/mapper/mpatha")
    udev.reread_partitions(runner, "/dev/sdc")
    lines = runner.lines()
    assert "udevadm trigger --action=change /dev/mapper/mpatha" in lines
    assert "partprobe /dev/sdc" in lines and "partprobe /dev/mapper/mpatha" not in lines


def test_md_on_a_multipath_disk_names_each_member_once_in_mdadm_conf():
    """In the installed system's initramfs, udev's incremental assembly took a path's copy of
    the /boot member (sda2) before multipath ran, multipath failed with EBUSY and root was
    never found (seen in the VM): DEVICE lines keep md to the map's partition."""
    res = build(layout({"serial": "SN-LUN0"}))
    step = next(s for s in res.steps if s.kind == "mdadm_conf")
    assert step.args["device_members"] == [f"/dev/disk/by-id/dm-uuid-part2-mpath-{WWID}",
                                           "/dev/vda2"]
    runner = FakeRunner({"udevadm info --query=symlink --name=/dev/vda2":
                         "disk/by-path/pci-0000:00:05.0-part2 disk/by-id/virtio-disk1-part2 "
                         "disk/by-partuuid/0d6b disk/by-uuid/1a2b"})
    assert md.device_lines(runner, step.args["device_members"]) == [
        f"DEVICE /dev/disk/by-id/dm-uuid-part2-mpath-{WWID}",
        "DEVICE /dev/disk/by-id/virtio-disk1-part2"]
    single_path = dict({k: v for k, v in MPATH.items() if k != "multipath"}, name="/dev/sdc")
    plain = build(layout({"serial": "SN-LUN0"}), disks()[1:] + [single_path])
    assert "device_members" not in next(s for s in plain.steps if s.kind == "mdadm_conf").args


def test_a_whole_multipath_disk_in_an_array_is_named_by_its_map_link():
    doc = layout({"serial": "SN-LUN0"})
    doc["disks"][0]["partitions"] = []
    doc["raids"] = [{"id": "md-data", "name": "data", "level": 1, "members": ["mp", "nv1"],
                     "metadata": "1.0"}]
    doc["volume_groups"], doc["bootloader"], doc["images"] = [], {"type": "none"}, []
    doc["filesystems"] = [{"device": "md-data", "type": "xfs", "mount": "/srv"},
                          {"device": "boot1", "type": "ext4", "mount": "/"}]
    step = next(s for s in build(doc).steps if s.kind == "mdadm_conf")
    assert step.args["device_members"] == [f"/dev/disk/by-id/dm-uuid-mpath-{WWID}",
                                           "/dev/nvme0n1p1"]


def test_the_images_multipath_tools_are_looked_up_inside_the_target(tmp_path):
    (tmp_path / "usr" / "sbin").mkdir(parents=True)
    assert not multipath.has_tools(str(tmp_path))
    outside = tmp_path.parent / "outside-multipath"
    outside.write_text("")
    (tmp_path / "usr" / "sbin" / "multipath").symlink_to(outside)   # absolute: the target's /
    assert not multipath.has_tools(str(tmp_path))
    (tmp_path / "sbin").mkdir()
    (tmp_path / "sbin" / "multipath").write_text("")
    assert multipath.has_tools(str(tmp_path))
