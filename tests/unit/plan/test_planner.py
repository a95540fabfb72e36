"""The plan is ordered and every step carries fully resolved arguments."""

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline
from provision_agent.plan.units import MiB
from tests.unit.helpers import inventory, mutate, sample

DISKS = inv_mod.from_document(inventory("three-disks"))


def plan(doc):
    return pipeline.build_plan(NativeDriver(doc).layout(), DISKS)


def steps(doc, kind=None):
    return [s for s in plan(doc).steps if kind is None or s.kind == kind]


def test_gpt_partition_args():
    parts = steps(sample("single-disk"), "partition")
    assert [p.args["device"] for p in parts] == ["/dev/vda1", "/dev/vda2", "/dev/vda3"]
    bios = parts[0].args
    assert bios["type"] == "21686148-6449-6E6F-744E-656564454649"
    assert (bios["offset"], bios["size"], bios["sector_size"]) == (MiB, MiB, 512)
    assert parts[1].args["type"] == "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F"
    assert parts[2].args["name"] == "root" and parts[2].args["kind"] is None


def test_msdos_plan_has_extended_and_logical_with_mbr_types():
    doc = {"version": 1, "disks": [{"id": "d", "match": {"name": "vda"}, "table": "msdos",
           "partitions": [{"id": f"p{i}", "size": 100, "type": t} for i, t in
                          enumerate(["linux", "swap", "lvm", "raid", "linux"])]
           + [{"id": "last", "size": "remaining"}]}],
           "filesystems": [{"device": "last", "type": "ext4", "mount": "/"}]}
    parts = steps(doc, "partition")
    assert [(p.args["number"], p.args["kind"], p.args["type"]) for p in parts] == [
        (1, "primary", "0x83"), (2, "primary", "0x82"), (3, "primary", "0x8e"),
        (4, "extended", "0x0f"), (5, "logical", "0xfd"), (6, "logical", "0x83"),
        (7, "logical", "0x83")]
    settle = steps(doc, "settle")[0]
    assert "/dev/vda4" not in settle.args["devices"]     # the container has no content


def test_keep_partition_is_passed_to_wipe_and_partition():
    doc = mutate(sample("single-disk"),
                 lambda d: d["disks"][0]["partitions"][1].__setitem__("keep", True))
    wipe = steps(doc, "wipe")[0]
    assert wipe.args == {"disk": "/dev/vda", "keep": [2]}
    assert steps(doc, "partition")[1].args["keep"] is True


def test_every_wipe_comes_before_the_tables_which_come_one_after_another():
    kinds = [(s.kind, s.args.get("disk")) for s in steps(sample("two-disk-raid-lvm"))
             if s.kind in ("wipe", "partition_table", "partition")]
    assert kinds[:4] == [("wipe", "/dev/vda"), ("wipe", "/dev/vdb"),
                         ("partition_table", "/dev/vda"), ("partition_table", "/dev/vdb")]
    assert {k for k, _ in kinds[4:]} == {"partition"}
    assert [d for _, d in kinds[4:]] == sorted(d for _, d in kinds[4:])   # a disk's together


def test_wipe_false_skips_wipe():
    doc = mutate(sample("single-disk"), lambda d: d["disks"][0].__setitem__("wipe", False))
    assert steps(doc, "wipe") == []


def test_configdrive_gets_an_implied_partition_at_the_end():
    doc = mutate(sample("single-disk"), lambda d: d.__setitem__(
        "configdrive", {"meta_data": {"uuid": "x"}}))
    parts = steps(doc, "partition")
    assert parts[-1].args["device"] == "/dev/vda4"
    assert parts[-1].args["size"] == 64 * MiB
    cd = steps(doc, "configdrive")[0]
    assert cd.args["device"] == "/dev/vda4" and cd.args["format"] == "config-2"
    # The 'remaining' root partition shrank to make room; the disk still fits.
    assert parts[2].args["offset"] + parts[2].args["size"] <= parts[3].args["offset"]


def test_grub_is_the_last_step_that_writes_so_a_power_cut_leaves_nothing_that_boots():
    """Issue 57: a cut after grub but before the configdrive booted the new system without its
    configdrive; grub now comes after everything else the run writes (only the unmount
    follows)."""
    doc = mutate(sample("single-disk"), lambda d: d.update(
        configdrive={"meta_data": {"uuid": "x"}}, bootloader={"boot_mode": "bios"},
        images=sample("uefi")["images"]))
    kinds = [s.kind for s in steps(doc)]
    assert kinds[-3:] == ["configdrive", "bootloader", "umount"], kinds


def test_images_raw_before_mount_and_tar_after_and_no_mkfs_under_raw_image():
    doc = mutate(sample("two-disk-raid-lvm"), lambda d: d.__setitem__("images", [
        {"uri": "http://h/root.img.gz", "format": "raw", "target": "lv-root",
         "checksum": "sha256:" + "0" * 64},
        {"uri": "http://h/data.tar.zst", "format": "tar", "target": "/srv/data",
         "checksum": "md5:" + "0" * 32}]))
    all_steps = plan(doc).steps
    kinds = [s.kind for s in all_steps]
    raw = next(i for i, s in enumerate(all_steps) if s.kind == "write_image"
               and s.args["format"] == "raw")
    tar = next(i for i, s in enumerate(all_steps) if s.kind == "write_image"
               and s.args["format"] == "tar")
    assert raw < kinds.index("mount") < tar < kinds.index("fstab")
    assert all_steps[raw].args["device"] == "/dev/os/root"
    assert all_steps[raw].args["fs_type"] == "ext4"
    assert all_steps[tar].args["mount_point"] == "/srv/data"
    assert "/dev/os/root" not in [s.args["device"] for s in all_steps if s.kind == "mkfs"]


def test_fstab_entries_and_passes():
    fstab = steps(sample("two-disk-raid-lvm"), "fstab")[0].args["entries"]
    by_mount = {e["mount_point"]: e for e in fstab}
    assert by_mount["/"]["pass"] == 1
    assert by_mount["/boot"]["pass"] == 2
    assert by_mount["none"] == {"device": "/dev/os/swap", "mount_point": "none",
                                "fs_type": "swap", "options": "sw", "dump": 0, "pass": 0}
    assert by_mount["/srv/data"]["options"] == "defaults,noatime"


def test_default_boot_targets_are_all_boot_array_members_disks():
    doc = mutate(sample("two-disk-raid-lvm"), lambda d: d.update(
        bootloader={"boot_mode": "bios"}, images=sample("uefi")["images"]))
    bl = steps(doc, "bootloader")[0]
    assert bl.args["targets"] == ["/dev/vda", "/dev/vdb"]


def test_unused_esps_on_target_disks_become_copies_of_the_mounted_one():
    doc = sample("uefi-two-disk-raid-lvm")
    bl = steps(doc, "bootloader")[0]
    assert bl.args["targets"] == ["/dev/vda", "/dev/vdb"]
    assert bl.args["esp_copies"] == ["/dev/vdb1"]
    made = {s.args["device"]: s.args for s in steps(doc, "mkfs")}
    assert made["/dev/vdb1"]["fs_type"] == "vfat" and made["/dev/vdb1"]["label"] == "EFI"
    # fstab names the primary's UUID; the copy must answer to it when the primary's disk is gone
    assert made["/dev/vdb1"]["volume_id_of"] == "/dev/vda1"
    assert "volume_id_of" not in made["/dev/vda1"]
    kinds = [s.kind for s in steps(doc)]
    assert kinds.index("mkfs") < kinds.index("mount") < kinds.index("bootloader")


def test_no_esp_copies_in_bios_mode_or_for_an_esp_the_input_uses():
    def bios_mode(d):
        d["bootloader"]["boot_mode"] = "bios"
        for disk in d["disks"]:     # grub's room on GPT in BIOS mode (checked: issue 56)
            disk["partitions"].insert(0, {"id": f"bios-{disk['id']}", "size": 1,
                                          "type": "bios_grub"})
    bios = mutate(sample("uefi-two-disk-raid-lvm"), bios_mode)
    assert steps(bios, "bootloader")[0].args["esp_copies"] == []
    assert "/dev/vdb2" not in {s.args["device"] for s in steps(bios, "mkfs")}
    owned = mutate(sample("uefi-two-disk-raid-lvm"), lambda d: d["volume_groups"][0][
        "pvs"].append("esp1"))
    assert steps(owned, "bootloader")[0].args["esp_copies"] == []
    assert "/dev/vdb1" not in {s.args["device"] for s in steps(owned, "mkfs")}
    # one listed with an unmounted vfat is a copy, made as listed (issue 56)
    listed = mutate(sample("uefi-two-disk-raid-lvm"), lambda d: d["filesystems"].append(
        {"device": "esp1", "type": "vfat", "label": "SPARE"}))
    assert steps(listed, "bootloader")[0].args["esp_copies"] == ["/dev/vdb1"]
    assert [(s.args["label"], s.args["volume_id_of"]) for s in steps(listed, "mkfs")
            if s.args["device"] == "/dev/vdb1"] == [("SPARE", "/dev/vda1")]


def test_whole_disk_pv_and_striped_lv():
    doc = {"version": 1,
           "disks": [{"id": "sys", "match": {"name": "vda"},
                      "partitions": [{"id": "root", "size": "remaining"}]},
                     {"id": "b", "match": {"name": "vdb"}}, {"id": "c", "match": {"name": "vdc"}}],
           "raids": [{"id": "md0", "level": 0, "members": ["b", "c"], "chunk": 64}],
           "volume_groups": [{"id": "data", "pvs": ["md0"], "logical_volumes": [
               {"id": "lv", "size": "remaining"}]}],
           "filesystems": [{"device": "root", "type": "ext4", "mount": "/"},
                           {"device": "lv", "type": "xfs", "mount": "/data"}]}
    md = steps(doc, "md_create")[0].args
    assert md["members"] == ["/dev/vdb", "/dev/vdc"] and md["chunk_kib"] == 64
    assert [s.args["disk"] for s in steps(doc, "partition_table")] == ["/dev/vda"]
    assert [s.args["disk"] for s in steps(doc, "wipe")] == ["/dev/vda", "/dev/vdb", "/dev/vdc"]


def test_steps_serialise_to_plain_json():
    import json
    for s in plan(sample("two-disk-raid-lvm")).steps:
        assert json.loads(json.dumps(s.to_dict()))["kind"] == s.kind


def test_an_implied_configdrive_partition_keeps_mirror_members_equal():
    """The configdrive goes on the first disk; the RAID1 members sized by what remains must
    come out the same size on both disks, as they do without a configdrive."""
    from tests.unit.helpers import CONFIGDRIVE
    doc = sample("two-disk-raid-lvm")
    doc["configdrive"] = {"content": CONFIGDRIVE}
    parts = steps(doc, "partition")
    sizes = {p.args["device"]: p.args["size"] for p in parts}
    members = sorted((d, n) for d, n in sizes.items() if d.endswith("3"))
    assert len(members) == 2 and members[0][1] == members[1][1], sizes
    # the first disk holds the configdrive, the second an unused partition of its size
    assert sizes["/dev/vda4"] == sizes["/dev/vdb4"] == 64 * MiB
    created = [s.args.get("partition") for s in steps(doc) if s.kind == "mkfs"]
    assert not any("pad" in str(c) for c in created)
