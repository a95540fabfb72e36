"""Every semantic problem is found before anything runs, with its location, all at once."""

import json

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError, MachineMismatch
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline
from tests.unit.helpers import inventory, mutate, run_cli, sample

DISKS = inv_mod.from_document(inventory("three-disks"))


def problems_of(doc, disks=DISKS):
    with pytest.raises((InputError, MachineMismatch)) as exc:
        pipeline.build_plan(NativeDriver(doc).layout(), disks)
    return exc.value, [str(p) for p in exc.value.problems]


def test_samples_are_valid():
    for name, inv in (("single-disk", "single-disk"), ("two-disk-raid-lvm", "three-disks"),
                      ("uefi", "single-disk"), ("msdos-logical", "three-disks"),
                      ("three-disk-raid5-raid0-striped", "three-disks")):
        planned = pipeline.build_plan(NativeDriver(sample(name)).layout(),
                                      inv_mod.from_document(inventory(inv)))
        assert planned.steps


def test_schema_errors_carry_json_paths():
    doc = mutate(sample("two-disk-raid-lvm"), lambda d: (
        d["disks"][1]["partitions"][2].__setitem__("size", "lots"),
        d["raids"][0].__setitem__("level", 3),
        d["filesystems"][0].__setitem__("type", "hfsplus")))
    with pytest.raises(InputError) as exc:
        NativeDriver(doc).layout()
    locations = {p.location for p in exc.value.problems}
    assert "$.disks[1].partitions[2].size" in locations
    assert "$.raids[0].level" in locations
    assert "$.filesystems[0].type" in locations


def test_unknown_reference_and_duplicate_ids():
    doc = mutate(sample("two-disk-raid-lvm"), lambda d: (
        d["raids"][0]["members"].__setitem__(1, "nope"),
        d["disks"][1]["partitions"][0].__setitem__("id", "bios0")))
    err, problems = problems_of(doc)
    assert isinstance(err, InputError)
    assert any("$.raids[0]" in p and "'nope'" in p for p in problems)
    assert any("$.disks[1].partitions[0]" in p and "duplicate id 'bios0'" in p for p in problems)


def test_raid_level_vs_member_count():
    doc = mutate(sample("two-disk-raid-lvm"), lambda d: d["raids"][1].__setitem__("level", 5))
    _, problems = problems_of(doc)
    assert any("$.raids[1]" in p and "RAID5 needs at least 3 members, got 2" in p
               for p in problems)


def test_duplicate_mount_points_and_no_root():
    doc = mutate(sample("two-disk-raid-lvm"),
                 lambda d: d["filesystems"][1].__setitem__("mount", "/boot"))
    _, problems = problems_of(doc)
    assert any("$.filesystems[1]" in p and "mount point /boot is also used" in p
               for p in problems)
    assert any("no root filesystem" in p for p in problems)


def test_remaining_twice_on_one_disk():
    doc = mutate(sample("single-disk"),
                 lambda d: d["disks"][0]["partitions"][1].__setitem__("size", "remaining"))
    _, problems = problems_of(doc)
    assert any("$.disks[0]" in p and "'remaining' is used by 2 partitions" in p
               for p in problems)


def test_device_used_twice():
    doc = mutate(sample("two-disk-raid-lvm"),
                 lambda d: d["volume_groups"][0]["pvs"].append("md-boot"))
    _, problems = problems_of(doc)
    assert any("'md-boot' is used by more than one" in p for p in problems)


def test_bootloader_target_without_boot_partition():
    doc = mutate(sample("single-disk"), lambda d: (
        d["disks"][0]["partitions"].pop(0),
        d.__setitem__("bootloader", {"boot_mode": "bios", "targets": ["disk0"]})))
    _, problems = problems_of(doc)
    assert any("$.bootloader" in p and "needs a bios_grub partition" in p for p in problems)


def test_uefi_needs_esp_mount():
    doc = mutate(sample("uefi"), lambda d: d["filesystems"].pop(0))
    _, problems = problems_of(doc)
    assert any("vfat filesystem mounted at /boot/efi" in p for p in problems)


def test_image_without_checksum_refused_unless_allowed():
    doc = mutate(sample("single-disk"), lambda d: d.__setitem__(
        "images", [{"uri": "http://10.0.2.2/root.img.gz", "target": "root"}]))
    _, problems = problems_of(doc)
    assert any("$.images[0]" in p and "no checksum" in p for p in problems)
    doc["images"][0]["allow_no_checksum"] = True
    pipeline.build_plan(NativeDriver(doc).layout(), DISKS)


def test_disk_too_small_is_machine_mismatch():
    doc = mutate(sample("single-disk"),
                 lambda d: d["disks"][0]["partitions"][1].__setitem__("size", "8GiB"))
    err, problems = problems_of(doc)
    assert isinstance(err, MachineMismatch) and err.exit_code == 3
    assert any("$.disks[0]" in p and "need" in p and "/dev/vda" in p for p in problems)


def test_hint_matching_no_disk_or_several():
    doc = mutate(sample("two-disk-raid-lvm"), lambda d: (
        d["disks"][0].__setitem__("match", {"serial": "nosuch"}),
        d["disks"][1].__setitem__("match", {"model": "QEMU HARDDISK"})))
    err, problems = problems_of(doc)
    assert isinstance(err, MachineMismatch)
    assert any("$.disks[0]" in p and "no disk matches serial='nosuch'" in p
               and "/dev/vda (4GiB, serial disk0)" in p for p in problems)
    assert any("$.disks[1]" in p and "3 disks match" in p for p in problems)


def test_vg_too_small_is_machine_mismatch():
    doc = mutate(sample("two-disk-raid-lvm"),
                 lambda d: d["volume_groups"][0]["logical_volumes"][0].__setitem__("size", "20GiB"))
    err, problems = problems_of(doc)
    assert isinstance(err, MachineMismatch)
    assert any("volume group os" in p for p in problems)


def test_all_problems_reported_at_once(tmp_path):
    doc = mutate(sample("two-disk-raid-lvm"), lambda d: (
        d["raids"][1].__setitem__("level", 6),
        d["filesystems"][1].__setitem__("mount", "/boot"),
        d["disks"][0]["partitions"][1].__setitem__("size", "remaining")))
    rc, out, err = run_cli(tmp_path, doc)
    assert rc == 2
    assert "Traceback" not in err
    assert err.count("\n  - ") >= 4
    assert "$.raids[1]" in err and "$.filesystems[1]" in err and "$.disks[0]" in err


def test_by_id_and_by_path_hints():
    disks = DISKS
    assert [d["name"] for d in inv_mod.match(disks, {"by_id": "virtio-disk1"})] == ["/dev/vdb"]
    assert [d["name"] for d in inv_mod.match(
        disks, {"by_path": "/dev/disk/by-path/pci-0000:00:06.0"})] == ["/dev/vdc"]
    assert [d["name"] for d in inv_mod.match(disks, {"name": "vda"})] == ["/dev/vda"]
    assert len(inv_mod.match(disks, {"size": ">= 4"})) == 3
    assert inv_mod.match(disks, {"size": "> 4"}) == []


def test_inventory_bare_and_wrapped_forms(tmp_path):
    wrapped = inventory("single-disk")
    bare = wrapped["inventory"]
    assert inv_mod.from_document(wrapped) == inv_mod.from_document(bare)
    with pytest.raises(InputError):
        inv_mod.from_document({"disks": [{"name": "sda"}]})
    p = tmp_path / "inv.json"
    p.write_text("{not json")
    with pytest.raises(InputError) as exc:
        inv_mod.load(str(p))
    assert "not valid JSON" in str(exc.value)
    assert json.dumps  # keep import used


def test_label_length_per_filesystem():
    doc = mutate(sample("uefi"), lambda d: d["filesystems"][0].__setitem__("label", "EFI-SYSTEM-1"))
    _, problems = problems_of(doc)
    assert any("$.filesystems[0]" in p and "vfat labels have at most 11" in p for p in problems)


def test_kept_partition_cannot_be_raid_member_or_pv():
    def change(d):
        d["disks"][0]["partitions"][1]["keep"] = True      # boot0, a RAID1 member
        d["disks"][0]["partitions"][2]["keep"] = True      # os0, a member too
    _, found = problems_of(mutate(sample("two-disk-raid-lvm"), change))
    assert any("'boot0' is kept with its contents, so it cannot become a member of a new array"
               in p for p in found), found
    assert any("'os0' is kept with its contents, so it cannot become a member of a new array"
               in p for p in found), found


def test_kept_partition_keeps_its_filesystem(tmp_path):
    doc = mutate(sample("single-disk"), lambda d: d["disks"][0]["partitions"][2]
                 .update(keep=True))
    rc, out, err = run_cli(tmp_path, doc, extra=["--plan_format", "json"])
    assert rc == 0, err
    steps = json.loads(out)["steps"]
    assert not any(s["kind"] == "mkfs" and s["args"]["device"] == "/dev/vda3" for s in steps)
    # a kept root is used as it is: mounted, so that the image and fstab go into it
    (mount,) = [s for s in steps if s["kind"] == "mount" and s["args"]["device"] == "/dev/vda3"]
    assert mount["args"]["mount_point"] == "/" and "kept" in mount["description"]
    kinds = [s["kind"] for s in steps]
    assert steps.index(mount) < kinds.index("fstab")
    fstab = next(s for s in steps if s["kind"] == "fstab")["args"]["entries"]
    assert any(e["device"] == "/dev/vda3" for e in fstab)
    wipe = next(s for s in steps if s["kind"] == "wipe")
    assert wipe["args"]["keep"] == [3]


def _kept_vg(d):
    """single-disk with a fourth partition: the one PV of a kept VG 'data' whose LV 'srv'
    holds /srv."""
    d["disks"][0]["partitions"][2]["size"] = "2GiB"
    d["disks"][0]["partitions"].append({"id": "pv-data", "size": "remaining", "type": "lvm",
                                        "keep": True})
    d["volume_groups"] = [{"id": "vg-data", "name": "data", "pvs": ["pv-data"], "keep": True,
                           "logical_volumes": [{"id": "lv-srv", "name": "srv",
                                                "size": "remaining"}]}]
    d["filesystems"].append({"device": "lv-srv", "type": "xfs", "mount": "/srv"})


def test_kept_volume_group_is_activated_and_nothing_in_it_made(tmp_path):
    doc = mutate(sample("single-disk"), _kept_vg)
    rc, out, err = run_cli(tmp_path, doc, extra=["--plan_format", "json"])
    assert rc == 0, err
    steps = json.loads(out)["steps"]
    kinds = [s["kind"] for s in steps]
    assert "vg_activate" in kinds and not {"pv_create", "vg_create", "lv_create"} & set(kinds)
    assert steps[kinds.index("vg_activate")]["args"] == {
        "name": "data", "pvs": ["/dev/vda4"], "lvs": ["srv"], "devices": ["/dev/data/srv"]}
    assert kinds.index("settle") < kinds.index("vg_activate") < kinds.index("mkfs")
    assert not [s for s in steps if s["kind"] == "mkfs"
                and s["args"]["device"] == "/dev/data/srv"]
    # mounted at /srv, used as it is, behind the root it sits in
    mounts = [s["args"] for s in steps if s["kind"] == "mount"]
    assert [m["mount_point"] for m in mounts] == ["/", "/srv"]
    assert mounts[1]["device"] == "/dev/data/srv"
    fstab = next(s for s in steps if s["kind"] == "fstab")["args"]["entries"]
    assert any(e["device"] == "/dev/data/srv" for e in fstab)


def test_kept_volume_group_needs_kept_partitions_and_takes_no_image():
    def change(d):
        _kept_vg(d)
        d["disks"][0]["partitions"][3]["keep"] = False
        d["images"] = [{"uri": "http://x/root.img", "target": "lv-srv", "allow_no_checksum": True}]
    _, found = problems_of(mutate(sample("single-disk"), change))
    assert any("$.volume_groups[0]" in p and "the volume group is kept, so its physical volume "
               "'pv-data' must be a kept partition" in p for p in found), found
    assert any("$.images[0]: 'lv-srv' is kept with its contents, so no image" in p
               for p in found), found


def test_kept_partition_in_a_new_volume_group_is_refused():
    def change(d):
        _kept_vg(d)
        d["volume_groups"][0]["keep"] = False
    _, found = problems_of(mutate(sample("single-disk"), change))
    assert any("'pv-data' is kept with its contents, so it cannot become a physical volume of "
               "a new volume group" in p for p in found), found


def test_a_bootloader_needs_an_image_to_install_into(tmp_path):
    doc = mutate(sample("uefi"), lambda d: d.pop("images"))
    rc, out, err = run_cli(tmp_path, doc)
    assert rc == 2 and out == ""
    assert "$.bootloader: grub is installed into the system an image brings" in err
    doc["bootloader"]["type"] = "none"
    rc, out, err = run_cli(tmp_path, doc)
    assert rc == 0, err


def test_secure_boot_needs_grub_in_uefi():
    for bootloader in ({"boot_mode": "bios", "secure_boot": True},
                       {"type": "none", "secure_boot": True},
                       {"type": "image", "secure_boot": True}):
        doc = mutate(sample("uefi"), lambda d, b=bootloader: d.__setitem__("bootloader", b))
        _, problems = problems_of(doc)
        assert any("secure_boot needs a grub2 bootloader booting in uefi" in p
                   for p in problems), problems
    doc = mutate(sample("uefi"), lambda d: d["bootloader"].__setitem__("secure_boot", True))
    (step,) = [s for s in pipeline.build_plan(NativeDriver(doc).layout(),
                                              inv_mod.from_document(inventory("single-disk"))
                                              ).steps if s.kind == "bootloader"]
    assert step.args["secure_boot"] is True


WHOLE_DISK = {"version": 1, "disks": [{"id": "d0", "match": {"name": "/dev/vda"}},
                                      {"id": "d1", "match": {"name": "/dev/vdb"},
                                       "partitions": [{"id": "data", "size": "1GiB"}]}],
              "images": [{"uri": "http://h/disk.img.zst", "format": "disk", "target": "d0",
                          "checksum": "sha256:" + "0" * 64}],
              "bootloader": {"type": "image", "boot_mode": "uefi"}}


def test_a_whole_disk_images_own_bootloader_gets_an_entry_step_in_uefi_mode():
    planned = pipeline.build_plan(NativeDriver(WHOLE_DISK).layout(), DISKS)
    (step,) = [s for s in planned.steps if s.kind == "bootloader"]
    assert (step.args["type"], step.args["targets"]) == ("image", ["/dev/vda"])
    bios = mutate(WHOLE_DISK, lambda d: d["bootloader"].__setitem__("boot_mode", "bios"))
    planned = pipeline.build_plan(NativeDriver(bios).layout(), DISKS)
    assert not [s for s in planned.steps if s.kind == "bootloader"]


@pytest.mark.parametrize("change,said", [
    (lambda d: d["images"][0].update(format="raw", target="data"),
     "$.bootloader: type 'image' is the bootloader a whole-disk image brings"),
    (lambda d: d["bootloader"].__setitem__("targets", ["d1"]),
     "$.bootloader: bootloader target 'd1' gets no whole-disk image (a disk with partitions)"),
    (lambda d: d["bootloader"].__setitem__("targets", ["nope"]),
     "$.bootloader: bootloader target 'nope' gets no whole-disk image (not a disk id)"),
    (lambda d: d["bootloader"].__setitem__("kernel_params", "quiet"),
     "$.bootloader: kernel_params cannot be set for type 'image'"),
])
def test_the_image_type_needs_a_whole_disk_image_it_names(change, said):
    _, problems = problems_of(mutate(WHOLE_DISK, change))
    assert any(p.startswith(said) for p in problems), problems


def test_on_member_failure_reaches_the_plan_and_defaults_to_fail():
    doc = mutate(sample("two-disk-raid-lvm"),
                 lambda d: d["raids"][1].__setitem__("on_member_failure", "degrade"))
    planned = pipeline.build_plan(NativeDriver(doc).layout(), DISKS)
    made = {s.name: s.on_member_failure for s in planned.steps if s.kind == "md_create"}
    assert sorted(made.values()) == ["degrade", "fail"]


def test_on_member_failure_is_checked_with_its_location():
    doc = mutate(sample("two-disk-raid-lvm"),
                 lambda d: d["raids"][0].__setitem__("on_member_failure", "ignore"))
    with pytest.raises(InputError) as exc:
        NativeDriver(doc).layout()
    assert "$.raids[0].on_member_failure" in {p.location for p in exc.value.problems}
    doc = mutate(sample("three-disk-raid5-raid0-striped"), lambda d: [
        r.__setitem__("on_member_failure", "degrade") for r in d["raids"]])
    _, problems = problems_of(doc)
    raid0 = [i for i, r in enumerate(doc["raids"]) if r["level"] == 0]
    assert raid0
    assert [p for p in problems if "on_member_failure" in p] == [
        f"$.raids[{i}].on_member_failure: on_member_failure degrade needs a redundant array "
        f"(RAID1, 4, 5, 6 or 10): RAID0 cannot run without a member; remove it or choose "
        f"another level" for i in raid0]
