"""The nailgun data driver: each Fuel volume type, disk matching, sizes and error locations."""

import copy
import json

import pytest

from provision_agent.data_drivers.nailgun.disks import disk_hints
from provision_agent.data_drivers.nailgun.driver import NailgunDriver
from provision_agent.errors import InputError, MachineMismatch
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline
from tests.unit.helpers import inventory, run_cli, sample


def disk(ident, size, volumes, name=None, extra=None):
    return {"type": "disk", "id": ident, "name": name or ident, "size": size,
            "extra": extra or [], "volumes": volumes}


ROOT_IMAGE = {"uri": "http://10.20.0.2:8080/targetimages/env_1_ubuntu_1604_amd64.img.gz",
              "format": "ext4", "container": "gzip"}


def fuel(spaces, **ks_meta):
    meta = {"pm_data": {"ks_spaces": spaces, "kernel_params": "console=ttyS0"},
            "image_data": {"/": ROOT_IMAGE}}
    meta.update(ks_meta)
    return {"ks_meta": meta}


ROOT_PART = {"type": "partition", "mount": "/", "file_system": "ext4", "size": 2000}


def native(doc):
    return NailgunDriver(doc).native_document()


def problems(doc):
    with pytest.raises(InputError) as exc:
        NailgunDriver(doc).layout()
    return [str(p) for p in exc.value.problems]


def plan(doc, inv="three-disks"):
    disks = inv_mod.from_document(inventory(inv))
    return pipeline.build_plan(NailgunDriver(doc).layout(), disks)


def test_every_used_disk_gets_fuels_bios_grub_and_uefi_partitions_first():
    doc = native(fuel([disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART])]))
    parts = doc["disks"][0]["partitions"]
    assert [(p["type"], p["size"]) for p in parts] == [
        ("bios_grub", 24), ("linux", 200), ("linux", 2000)]
    assert parts[1]["name"] == "UEFI"
    assert doc["filesystems"] == [{"device": parts[2]["id"], "type": "ext4", "mount": "/",
                                   "origin": "ks_spaces[0] (vda) volumes[1]"}]
    assert doc["bootloader"]["boot_mode"] == "bios"
    assert doc["bootloader"]["kernel_params"] == "console=ttyS0"


def test_zero_size_volumes_and_lvm_meta_pool_are_ignored_and_empty_disks_skipped():
    doc = native(fuel([
        disk("vda", 4096, [{"type": "boot", "size": 300}, {"type": "lvm_meta_pool", "size": 0},
                           {"type": "pv", "vg": "os", "size": 0, "lvm_meta_size": 0},
                           ROOT_PART]),
        disk("vdb", 4096, [{"type": "boot", "size": 300},
                           {"type": "partition", "mount": "/srv", "size": 0}])]))
    assert len(doc["disks"]) == 1
    assert [p["size"] for p in doc["disks"][0]["partitions"]] == [24, 200, 2000]
    assert doc["volume_groups"] == []


def test_partition_options_guid_keep_label_swap_and_default_xfs():
    vols = [{"type": "boot", "size": 300},
            {"type": "partition", "mount": "/", "file_system": "ext4", "size": 1000,
             "disk_label": "root"},
            {"type": "partition", "mount": "none", "size": 100,
             "partition_guid": "45b0969e-9b03-4f30-b4c6-b4b80ceff106"},
            {"type": "partition", "mount": "/srv", "size": 500, "keep_data": True},
            {"type": "partition", "mount": "swap", "file_system": "swap", "size": 256}]
    doc = native(fuel([disk("vda", 4096, vols)]))
    parts = doc["disks"][0]["partitions"][2:]
    assert parts[1]["type"] == "custom"
    assert parts[1]["type_guid"] == "45b0969e-9b03-4f30-b4c6-b4b80ceff106"
    assert parts[2]["keep"] is True
    assert parts[3]["type"] == "swap"
    fss = {fs["device"]: fs for fs in doc["filesystems"]}
    assert fss[parts[0]["id"]]["label"] == "root"
    assert parts[1]["id"] not in fss          # mount "none": no filesystem
    assert fss[parts[2]["id"]]["type"] == "xfs"
    assert fss[parts[3]["id"]] == {"device": parts[3]["id"], "type": "swap",
                                   "origin": "ks_spaces[0] (vda) volumes[4]"}


def test_raid_volumes_with_the_same_mount_form_one_raid1_across_disks():
    boot = {"type": "raid", "mount": "/boot", "size": 200}
    data = {"type": "raid", "mount": "/srv/data", "file_system": "ext4", "size": 500}
    doc = native(fuel([disk("vda", 4096, [{"type": "boot", "size": 300}, boot, ROOT_PART, data]),
                       disk("vdb", 4096, [{"type": "boot", "size": 300}, boot, data]),
                       disk("vdc", 4096, [{"type": "boot", "size": 300}, boot])]))
    raids = {r["name"]: r for r in doc["raids"]}
    assert raids["boot"]["level"] == 1 and raids["boot"]["metadata"] == "1.0"
    # vdc holds nothing but Nailgun's /boot leftover: fuel-agent left it alone, so do we.
    assert [d["match"] for d in doc["disks"]] == [{"name": "/dev/vda"}, {"name": "/dev/vdb"}]
    assert raids["boot"]["members"] == ["d0-v1", "d1-v1"]
    assert raids["srv-data"]["members"] == ["d0-v3", "d1-v2"]
    assert "metadata" not in raids["srv-data"]
    fss = {fs.get("mount"): fs for fs in doc["filesystems"]}
    assert fss["/boot"]["device"] == "md-boot" and fss["/boot"]["type"] == "ext2"
    assert fss["/srv/data"]["type"] == "ext4"
    assert "ks_spaces[1] (vdb) volumes[1]" in raids["boot"]["origin"]


def test_a_lone_raid_volume_becomes_a_plain_partition():
    doc = native(fuel([disk("vda", 4096, [{"type": "boot", "size": 300},
                                          {"type": "raid", "mount": "/boot", "size": 200},
                                          ROOT_PART])]))
    assert doc["raids"] == []
    assert {fs["mount"]: fs["device"] for fs in doc["filesystems"]}["/boot"] == "d0-v1"


def test_pv_and_vg_spaces_make_volume_groups_and_lvs():
    spaces = [disk("vda", 4096, [{"type": "boot", "size": 300},
                                 {"type": "pv", "vg": "os", "lvm_meta_size": 64, "size": 3796}]),
              {"type": "vg", "id": "os", "label": "Base System", "min_size": 1000,
               "_allocate_size": "min",
               "volumes": [{"type": "lv", "name": "root", "mount": "/", "file_system": "ext4",
                            "size": 3000},
                           {"type": "lv", "name": "swap", "mount": "swap",
                            "file_system": "swap", "size": 512},
                           {"type": "lv", "name": "unused", "size": 0}]}]
    doc = native(fuel(spaces))
    (vg,) = doc["volume_groups"]
    assert vg["name"] == "os" and vg["pvs"] == ["d0-v1"]
    assert [(lv["name"], lv["size"]) for lv in vg["logical_volumes"]] == [
        ("root", 3000), ("swap", 512)]
    assert doc["disks"][0]["partitions"][-1]["type"] == "lvm"
    res = plan(fuel(spaces))
    lvs = res.resolved.layout.volume_groups[0].logical_volumes
    assert [lv.name for lv in lvs] == ["root", "swap"]


def test_lvs_larger_than_the_pvs_minus_lvm_metadata_name_the_vg_space():
    spaces = [disk("vda", 4096, [{"type": "boot", "size": 300},
                                 {"type": "pv", "vg": "os", "lvm_meta_size": 64, "size": 3796}]),
              {"type": "vg", "id": "os", "volumes": [
                  {"type": "lv", "name": "root", "mount": "/", "file_system": "ext4",
                   "size": 3796 - 64 + 1}]}]
    assert problems(fuel(spaces)) == [
        "ks_spaces[1] (os): logical volumes need 3733 MiB but the pv volumes give 3732 MiB "
        "after LVM metadata"]


def test_lvm_meta_size_below_ten_is_an_error_naming_the_volume():
    spaces = [disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART,
                                 {"type": "pv", "vg": "os", "lvm_meta_size": 4, "size": 100}])]
    assert any(p.startswith("ks_spaces[0] (vda) volumes[2]: lvm_meta_size 4")
               for p in problems(fuel(spaces)))


def test_last_volume_absorbs_alignment_and_gpt_backup_by_a_few_mib():
    # Fuel reserved exactly bios_grub + UEFI (224 MiB) and gave the rest to /: 2 MiB too many.
    doc = native(fuel([disk("vda", 4096, [{"type": "boot", "size": 224},
                                          dict(ROOT_PART, size=4096 - 224)])]))
    assert doc["disks"][0]["partitions"][-1]["size"] == 4096 - 224 - 2
    res = plan(fuel([disk("vda", 4096, [{"type": "boot", "size": 224},
                                        dict(ROOT_PART, size=4096 - 224)])]))
    root = res.resolved.layout.disks[0].partitions[-1]
    assert root.size.bytes == (4096 - 226) * 1024 * 1024


def test_fuels_disk_size_is_not_a_limit_the_real_disk_decides(tmp_path):
    # Fuel says 3800 MiB; the volumes need 200 MiB more; the real disk (4096 MiB) has room.
    doc = fuel([disk("vda", 3800, [{"type": "boot", "size": 300}, dict(ROOT_PART, size=3700)])])
    rc, out, err = run_cli(tmp_path, doc, extra=["--data_driver", "nailgun",
                                                 "--plan_format", "json"])
    assert rc == 0, err
    plan_doc = json.loads(out)
    root = plan_doc["layout"]["disks"][0]["partitions"][-1]
    assert (root["device"], root["size"] // (1 << 20)) == ("/dev/vda3", 3700)
    assert plan_doc["warnings"] == [
        "ks_spaces[0] (vda): the partitions need 3924 MiB (with 24 MiB bios_grub, 200 MiB UEFI "
        "and 2 MiB GPT overhead), more than Fuel's size of the disk (3800 MiB); the real disk's "
        "size decides"]
    rc, out, _ = run_cli(tmp_path, doc, extra=["--data_driver", "nailgun"])
    assert rc == 0 and out.startswith("Warning: ks_spaces[0] (vda): the partitions need 3924")


def test_volumes_beyond_the_real_disk_are_a_mismatch_naming_the_space(tmp_path):
    doc = fuel([disk("vda", 4096, [{"type": "boot", "size": 300}, dict(ROOT_PART, size=4000)])])
    with pytest.raises(MachineMismatch) as exc:
        plan(doc)
    assert [p.location for p in exc.value.problems] == ["ks_spaces[0] (vda)"]
    rc, _, err = run_cli(tmp_path, doc, extra=["--data_driver", "nailgun"])
    assert rc == 3 and "ks_spaces[0] (vda)" in err


def test_unknown_volume_type_and_bad_sizes_name_space_and_volume_index():
    out = problems(fuel([disk("sdc", 4096, [{"type": "boot", "size": 300}, ROOT_PART,
                                            {"type": "zfs", "size": 10},
                                            {"type": "partition", "size": "big"}])]))
    assert "ks_spaces[0] (sdc) volumes[2]: unknown volume type 'zfs' (partition, raid, pv, " \
           "boot, lvm_meta_pool)" in out
    assert "ks_spaces[0] (sdc) volumes[3]: a volume needs a type and a numeric size (MiB)" in out


def test_missing_ks_spaces_is_an_input_error():
    assert problems({"ks_meta": {}}) == [
        "ks_meta.pm_data.ks_spaces: missing: Fuel's partitioning data is a list of disk and vg "
        "spaces here"]


P4 = {"by_path": "/dev/disk/by-path/pci-0000:00:04.0"}
V0, V2 = ({"by_id": f"/dev/disk/by-id/virtio-disk{n}"} for n in (0, 2))


@pytest.mark.parametrize("space,hints", [
    # fuel-agent's order: every extra link, then id, then the name as the last fallback.
    ({"id": "disk/by-path/pci-0000:00:04.0", "name": "vda",
      "extra": ["disk/by-id/virtio-disk0"]}, [V0, P4, {"name": "/dev/vda"}]),
    ({"id": "disk/by-id/virtio-disk1", "name": "vdb"},
     [{"by_id": "/dev/disk/by-id/virtio-disk1"}, {"name": "/dev/vdb"}]),
    ({"id": "vdc", "name": "vdc", "extra": ["disk/by-id/virtio-disk2", "disk/by-id/other"]},
     [V2, {"by_id": "/dev/disk/by-id/other"}, {"name": "/dev/vdc"}]),
    ({"id": "vdc", "name": "vdc", "extra": ["virtio-disk2"]}, [V2, {"name": "/dev/vdc"}]),
    ({"id": "sda", "name": "sda", "extra": []}, [{"name": "/dev/sda"}]),
    # Bare kernel names in extra are names, not by-id links.
    ({"id": "x", "name": "sdb", "extra": ["sda", "/dev/nvme0n1", "md123", "dm-0"]},
     [{"name": "/dev/sda"}, {"name": "/dev/nvme0n1"}, {"name": "/dev/md123"},
      {"name": "/dev/dm-0"}, {"name": "/dev/x"}, {"name": "/dev/sdb"}]),
    # One link given as a string is one link, not one per character.
    ({"id": "vdc", "name": "vdc", "extra": "disk/by-id/virtio-disk2"}, [V2, {"name": "/dev/vdc"}]),
])
def test_disk_hint_order(space, hints):
    match, fallback = disk_hints(space)
    assert [match] + fallback == hints


def test_each_hint_kind_finds_the_vm_disk():
    disks = inv_mod.from_document(inventory("three-disks"))
    for space, name in (({"id": "disk/by-path/pci-0000:00:05.0"}, "/dev/vdb"),
                        ({"id": "vdc", "extra": ["disk/by-id/virtio-disk2"]}, "/dev/vdc"),
                        ({"id": "vda", "name": "vda"}, "/dev/vda")):
        match, _ = disk_hints(space)
        assert [d["name"] for d in inv_mod.match(disks, match)] == [name]


SATA = {"name": "/dev/sda", "size": 500107862016, "model": "ST500DM002-1BD142",
        "serial": "Z3T5ABCD", "wwn": "0x5000c5007a1b2c3d", "vendor": "ATA", "rotational": True,
        "by_path": "/dev/disk/by-path/pci-0000:00:1f.2-ata-1"}
SATA2 = dict(SATA, name="/dev/sdb", serial="Z3T5WXYZ", wwn="0x5000c5007a1b9999",
             by_path="/dev/disk/by-path/pci-0000:00:1f.2-ata-2")


def fuel_web_space(extra):
    """A disk space as fuel-web's CI documents have it (by-path id, by-id extras)."""
    return {"type": "disk", "id": "disk/by-path/pci-0000:00:1f.2-ata-9", "name": "sda",
            "size": 476940, "extra": extra,
            "volumes": [{"type": "boot", "size": 300}, dict(ROOT_PART, size=20000)]}


@pytest.mark.parametrize("inv_disks, extra, device, rule", [
    # Rich inventory (by_id lists): the scsi-SATA_ link is gone, the ata- link still finds it.
    ([dict(SATA, by_id=["/dev/disk/by-id/ata-ST500DM002-1BD142_Z3T5ABCD"]), SATA2],
     ["disk/by-id/scsi-SATA_ST500DM002-1BD_Z3T5ABCD", "disk/by-id/ata-ST500DM002-1BD142_Z3T5ABCD"],
     "/dev/sda", "by_id='/dev/disk/by-id/ata-ST500DM002-1BD142_Z3T5ABCD'"),
    # IPA-style inventory (no by_id): the link's serial and the wwn link identify the disk.
    ([SATA2, SATA], ["disk/by-id/ata-ST500DM002-1BD142_Z3T5ABCD"], "/dev/sda",
     "by_id='/dev/disk/by-id/ata-ST500DM002-1BD142_Z3T5ABCD'"),
    ([SATA, SATA2], ["disk/by-id/wwn-0x5000c5007a1b9999"], "/dev/sdb",
     "by_id='/dev/disk/by-id/wwn-0x5000c5007a1b9999'"),
    ([SATA, SATA2], ["disk/by-id/scsi-35000c5007a1b9999"], "/dev/sdb",
     "by_id='/dev/disk/by-id/scsi-35000c5007a1b9999'"),
    # No link and no by-path matches any more: fuel-agent's fallback to the name.
    ([SATA, SATA2], ["disk/by-id/ata-GONE_0000"], "/dev/sda", "name='/dev/sda'"),
])
def test_fuel_web_disk_matching_on_rich_and_ipa_inventories(inv_disks, extra, device, rule):
    doc = fuel([fuel_web_space(extra)])
    res = pipeline.build_plan(NailgunDriver(doc).layout(), inv_mod.from_document(
        {"inventory": {"disks": inv_disks}}))
    (disk_id,) = res.resolved.disks
    assert res.resolved.devices[disk_id] == device
    assert res.resolved.matched_by[disk_id] == rule


def test_the_plan_says_which_rule_matched(tmp_path):
    doc = fuel([fuel_web_space(["disk/by-id/ata-GONE_0000"])])
    inv = {"inventory": {"disks": [SATA, SATA2]}}
    rc, out, err = run_cli(tmp_path, doc, inv, extra=["--data_driver", "nailgun",
                                                     "--plan_format", "json"])
    assert rc == 0, err
    assert json.loads(out)["layout"]["disks"][0]["matched_by"] == "name='/dev/sda'"
    assert json.loads(out)["warnings"] == [
        "ks_spaces[0] (sda): found /dev/sda by a fallback (name='/dev/sda'); no disk matched "
        "by_id='/dev/disk/by-id/ata-GONE_0000'"]
    rc, out, err = run_cli(tmp_path, doc, inv, extra=["--data_driver", "nailgun"])
    assert rc == 0 and "matched by name='/dev/sda'" in out


def test_a_space_matching_no_disk_is_a_mismatch_naming_the_space():
    doc = fuel([disk("sdq", 4096, [{"type": "boot", "size": 300}, ROOT_PART],
                     extra=["disk/by-id/ata-NOPE"])])
    with pytest.raises(MachineMismatch) as exc:
        plan(doc)
    (p,) = exc.value.problems
    assert p.location == "ks_spaces[0] (sdq)" and "no disk matches" in p.message


def test_two_spaces_on_one_disk_are_reported_with_their_space():
    vols = [{"type": "boot", "size": 300}, ROOT_PART]
    doc = fuel([disk("vda", 4096, vols),
                disk("x", 4096, [{"type": "boot", "size": 300},
                                 {"type": "partition", "mount": "/srv", "size": 100}],
                     extra=["disk/by-id/virtio-disk0"])])
    with pytest.raises((MachineMismatch, InputError)) as exc:
        plan(doc)
    assert any(p.location.startswith("ks_spaces[1] (x)") for p in exc.value.problems), \
        exc.value.problems



# The names the translation gives the partitions it adds to every disk (bios_grub, UEFI) and to
# this disk's volumes (v2, v3): the mutations test found "duplicate id 'd1-uefi'", an id the
# Fuel document never wrote, refusing a document with nothing wrong in it.
@pytest.mark.parametrize("name", ["uefi", "bios_grub", "v2", "v3", "configdrive"])
def test_a_disk_named_like_a_partition_of_the_translation_plans(tmp_path, name):
    doc = sample("provision")
    doc["ks_meta"]["pm_data"]["ks_spaces"][1]["name"] = name
    rc, out, err = run_cli(tmp_path, doc, "fuel-three-disks",
                           extra=["--data_driver", "nailgun", "--plan_format", "json"])
    assert rc == 0, err
    ids = [d["id"] for d in json.loads(out)["layout"]["disks"]]
    ids += [p["id"] for d in json.loads(out)["layout"]["disks"] for p in d["partitions"]]
    assert len(ids) == len(set(ids)), ids

def test_image_data_targets_the_device_of_its_mount_without_checksum():
    doc = native(fuel([disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART])],
                      image_data={"/": {"uri": "http://h/img.gz", "format": "ext4",
                                        "container": "gzip"}}))
    assert doc["images"] == [{"uri": "http://h/img.gz", "format": "raw", "target": "d0-v1",
                              "compression": "gzip", "allow_no_checksum": True,
                              "origin": "ks_meta.image_data['/']"}]


def test_image_data_errors_name_the_mount():
    out = problems(fuel([disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART])],
                        image_data={"/": {"uri": "http://h/i", "format": "xfs", "container": "raw"},
                                    "/var": {"uri": "http://h/v", "format": "ext4",
                                             "container": "raw"},
                                    "/x": {"uri": "http://h/x", "container": "bz2"}}))
    assert any(p.startswith("ks_meta.image_data['/']: image format 'xfs' differs from the ext4")
               for p in out)
    assert "ks_meta.image_data['/var']: no volume in ks_spaces mounts /var" in out


def test_configdrive_from_hostname_keys_users_repos_and_interfaces():
    doc = sample("provision-vm")
    out = native(doc)
    cd = out["configdrive"]
    assert cd["format"] == "config-2" and cd["partition"] == "configdrive"
    assert cd["meta_data"]["hostname"] == "node-7.domain.tld"
    assert list(cd["meta_data"]["public_keys"].values()) == [doc["ks_meta"]["auth_key"]]
    assert cd["user_data"].startswith("#cloud-config\n")
    cloud = json.loads(cd["user_data"].split("\n", 1)[1])
    assert cloud["users"][1]["name"] == "fueladmin"
    assert cloud["apt"]["sources"]["ubuntu.list"]["source"] == \
        "deb http://archive.ubuntu.com/ubuntu/ xenial main universe multiverse"
    assert cd["network_data"]["links"][0]["ethernet_mac_address"] == "52:54:00:12:34:56"
    # The 20 MiB configdrive partition is the last one of the OS disk, where fuel-agent put it.
    first = out["disks"][0]["partitions"]
    assert [(p["id"], p["size"]) for p in first[:2]] == [("d0-bios_grub", 24), ("d0-uefi", 200)]
    assert (first[-1]["id"], first[-1]["size"]) == ("configdrive", 20)


def test_no_configdrive_without_node_data():
    out = native(fuel([disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART])]))
    assert "configdrive" not in out


def test_cli_data_driver_nailgun(tmp_path):
    rc, out, err = run_cli(tmp_path, sample("provision-vm"), extra=["--data_driver", "nailgun"])
    assert rc == 0, err
    assert "VG os" in out and "/dev/md/boot  RAID1" in out


def test_cli_reports_fuel_locations_with_exit_2(tmp_path):
    doc = copy.deepcopy(sample("provision-vm"))
    doc["ks_meta"]["pm_data"]["ks_spaces"][2]["volumes"][3]["type"] = "bogus"
    doc["ks_meta"]["pm_data"]["ks_spaces"][2]["volumes"][3]["size"] = 5
    rc, _, err = run_cli(tmp_path, doc, extra=["--data_driver", "nailgun"])
    assert rc == 2
    assert "ks_spaces[2] (vdc) volumes[3]: unknown volume type 'bogus'" in err


def test_a_fuel_document_is_refused_under_an_image_keyring():
    """Fuel's images carry no signature and its documents cannot say allow_unsigned."""
    layout = NailgunDriver(sample("provision")).layout()
    with pytest.raises(InputError) as caught:
        pipeline.check_layout(layout, keyring=True)
    assert all("no signature: a keyring is configured" in p.message
               for p in caught.value.problems)
    pipeline.check_layout(NailgunDriver(sample("provision")).layout())
