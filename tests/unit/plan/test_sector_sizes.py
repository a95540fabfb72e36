"""Disks of 512-byte, 512e (512 logical, 4096 physical) and 4Kn sectors: the inventory records
the block sizes, the plan is in bytes and says which sectors its table is written in."""

import json

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError, MachineMismatch
from provision_agent.plan import inventory, pipeline, render
from provision_agent.plan.units import GiB, MiB
from tests.unit.helpers import mutate, sample
from tests.unit.plan.test_encryption import encrypted_raid_lvm

# the layout of issue 53: ESP 512 MiB, /boot 1 GiB, / the rest, on a 4 GiB disk
LAYOUT = {"version": 1,
          "disks": [{"id": "d", "match": {"name": "/dev/sda"}, "table": "gpt", "partitions": [
              {"id": "esp", "size": "512MiB", "type": "esp"},
              {"id": "boot", "size": "1GiB"},
              {"id": "root", "size": "remaining"}]}],
          "filesystems": [{"device": "esp", "type": "vfat", "mount": "/boot/efi"},
                          {"device": "boot", "type": "ext4", "mount": "/boot"},
                          {"device": "root", "type": "ext4", "mount": "/"}]}


def disks(**sizes):
    return inventory.from_document({"disks": [{"name": "sda", "size": 4 * GiB, **sizes}]})


@pytest.mark.parametrize("logical,physical", [(512, 512), (512, 4096), (4096, 4096)])
def test_the_plan_is_in_bytes_and_names_the_disks_sector_size(logical, physical):
    planned = pipeline.build_plan(NativeDriver(LAYOUT).layout(), disks(
        logical_block_size=logical, physical_block_size=physical))
    parts = [s.args for s in planned.steps if s.kind == "partition"]
    assert [(p["offset"], p["size"], p["sector_size"]) for p in parts] == [
        (MiB, 512 * MiB, logical), (513 * MiB, GiB, logical),
        (1537 * MiB, 4 * GiB - 1538 * MiB, logical)]
    doc = json.loads(render.plan_json(planned))["layout"]["disks"][0]
    assert (doc["logical_block_size"], doc["physical_block_size"]) == (logical, physical)
    assert doc["block_sizes_recorded"] is True
    assert [p["offset"] for p in doc["partitions"]] == [p["offset"] for p in parts]
    text = render.plan_text(planned)
    assert f"{logical}-byte sectors" in text and "assumed" not in text


def test_an_inventory_without_block_sizes_is_planned_for_512_and_says_so():
    found = disks()
    assert inventory.block_sizes(found[0]) == (512, 512, False)
    planned = pipeline.build_plan(NativeDriver(LAYOUT).layout(), found)
    assert {s.args["sector_size"] for s in planned.steps if s.kind == "partition"} == {512}
    assert "512-byte sectors (assumed: the inventory does not record them)" in \
        render.plan_text(planned)
    assert json.loads(render.plan_json(planned))["layout"]["disks"][0][
        "block_sizes_recorded"] is False


@pytest.mark.parametrize("sizes,said", [
    ({"logical_block_size": 520}, "logical_block_size 520 is not one partition tables"),
    ({"logical_block_size": "4096"}, "logical_block_size must be a number of bytes"),
    ({"logical_block_size": 4096, "physical_block_size": 512},
     "physical_block_size 512 is not a multiple of logical_block_size 4096"),
    ({"physical_block_size": True}, "physical_block_size must be a number of bytes"),
])
def test_an_inventory_with_impossible_block_sizes_is_refused(sizes, said):
    with pytest.raises(InputError) as exc:
        disks(**sizes)
    assert said in str(exc.value)


def test_a_kept_partition_keeps_its_bytes_on_a_4kn_disk():
    """keep: the partition stays at the same bytes; the plan says so in bytes and in the
    disk's sectors, which is what the preflight compares with the table on disk."""
    doc = json.loads(json.dumps(LAYOUT))
    doc["disks"][0]["partitions"][1]["keep"] = True
    planned = pipeline.build_plan(NativeDriver(doc).layout(),
                                  disks(logical_block_size=4096, physical_block_size=4096))
    kept = [s.args for s in planned.steps if s.kind == "partition" and s.args["keep"]]
    assert [(k["number"], k["offset"], k["size"], k["sector_size"]) for k in kept] == [
        (2, 513 * MiB, GiB, 4096)]


# Two disks for arrays and volume groups: vda and vdb as the inventory records them.
def two_disks(a, b):
    return inventory.from_document({"disks": [
        {"name": "vda", "size": 4 * GiB, "logical_block_size": a[0], "physical_block_size": a[1]},
        {"name": "vdb", "size": 4 * GiB, "logical_block_size": b[0], "physical_block_size": b[1]},
        {"name": "vdc", "size": 4 * GiB}]})


def build(doc, disks):
    return pipeline.build_plan(NativeDriver(doc).layout(), disks)


def refused(doc, disks):
    with pytest.raises(MachineMismatch) as exc:
        build(doc, disks)
    return [str(p) for p in exc.value.problems]


def with_raid_metadata(metadata):
    def change(d):
        d["raids"][0]["metadata"] = metadata       # md-boot, ext2 /boot
    return mutate(sample("two-disk-raid-lvm"), change)


def test_an_array_over_disks_of_different_logical_sizes_is_built_with_the_largest():
    planned = build(with_raid_metadata("1.2"), two_disks((512, 4096), (4096, 4096)))
    assert planned.resolved.blocks["md-boot"] == (4096, 4096)
    assert planned.resolved.blocks["lv-root"] == (4096, 4096)
    assert [s.args["sector_size"] for s in planned.steps if s.kind == "partition"] == \
        [512] * 3 + [4096] * 3


def test_metadata_1_0_over_disks_of_different_logical_sizes_is_refused():
    found = refused(with_raid_metadata("1.0"), two_disks((512, 512), (4096, 4096)))
    assert found == ["$.raids[0]: members of different logical block sizes (/dev/vda2: 512, "
                     "/dev/vdb2: 4096): metadata 1.0 is read member by member as a plain "
                     "filesystem, written in the array's 4096-byte sectors; put the array on "
                     "disks of one sector size"]


def test_a_volume_group_over_different_logical_sizes_is_refused_with_the_reason():
    def change(d):
        d["volume_groups"][0]["pvs"] = ["os0", "os1"]    # two partitions, no array
        d["raids"] = d["raids"][:1]
        for disk in d["disks"]:
            disk["partitions"][2]["type"] = "lvm"
    doc = mutate(with_raid_metadata("1.2"), change)
    found = refused(doc, two_disks((512, 512), (4096, 4096)))
    assert found == ["$.volume_groups[0]: physical volumes of different logical block sizes "
                     "(/dev/vda3: 512, /dev/vdb3: 4096): LVM refuses one volume group over "
                     "different logical block sizes (lvm.conf allow_mixed_block_sizes); put os "
                     "on disks of one sector size"]
    # 512 and 512e are one logical size: built
    build(doc, two_disks((512, 512), (512, 4096)))


def encrypted_any_firmware():
    """The encrypted layout booted in the mode the machine has: BIOS boot from a 4Kn disk is
    refused (below)."""
    return mutate(encrypted_raid_lvm(), lambda d: d["bootloader"].__setitem__("boot_mode",
                                                                              "auto"))


@pytest.mark.parametrize("a,b,sector", [((512, 512), (512, 512), 512),
                                        ((512, 4096), (512, 4096), 4096),
                                        ((4096, 4096), (4096, 4096), 4096)])
def test_luks_sector_size_defaults_to_what_cryptsetup_picks_for_the_disk(a, b, sector):
    planned = build(encrypted_any_firmware(), two_disks(a, b))
    (step,) = [s for s in planned.steps if s.kind == "luks_format"]
    assert step.args["sector_size"] == sector
    assert planned.resolved.blocks["vg-os"][0] == sector


def test_a_luks_sector_smaller_than_the_disks_is_refused():
    doc = mutate(encrypted_any_firmware(),
                 lambda d: d["encrypted"][0].__setitem__("sector_size", 512))
    assert refused(doc, two_disks((4096, 4096), (4096, 4096))) == [
        "$.encrypted[0]: sector_size 512 is smaller than the 4096-byte logical blocks of "
        "/dev/md/os: cryptsetup cannot encrypt in sectors smaller than the device's; use 4096 "
        "or leave it out"]
    step = next(s for s in build(doc, two_disks((512, 4096), (512, 4096))).steps
                if s.kind == "luks_format")
    assert step.args["sector_size"] == 512          # said in the input: kept


def bios_single_disk():
    def change(d):
        d["bootloader"] = {"boot_mode": "bios"}
        d["images"] = sample("uefi")["images"]
    return mutate(sample("single-disk"), change)


def one_disk(logical, physical):
    return inventory.from_document({"disks": [
        {"name": "vda", "size": 4 * GiB, "logical_block_size": logical,
         "physical_block_size": physical}]})


def test_bios_boot_from_a_4kn_disk_is_refused_with_what_to_do():
    """Legacy BIOS reads 512-byte sectors: SeaBIOS does not take a 4Kn virtio or SCSI disk
    (tests/e2e/test_sector_sizes.py), server firmware boots 4Kn only in UEFI mode."""
    assert refused(bios_single_disk(), one_disk(4096, 4096)) == [
        "$.bootloader: BIOS boot from /dev/vda, a disk of 4096-byte logical sectors (4Kn): "
        "legacy BIOS reads its boot disk in 512-byte sectors and does not boot a 4Kn disk "
        "(server firmware supports 4Kn boot disks in UEFI mode only); boot the machine in "
        "UEFI mode (bootloader boot_mode 'uefi' and an esp partition) or put the bootloader "
        "on a disk of 512-byte logical sectors"]


@pytest.mark.parametrize("logical,physical", [(512, 512), (512, 4096)])
def test_bios_boot_from_512_and_512e_disks_is_planned(logical, physical):
    planned = build(bios_single_disk(), one_disk(logical, physical))
    assert [s.boot_mode for s in planned.steps if s.kind == "bootloader"] == ["bios"]


def test_uefi_and_auto_boot_from_a_4kn_disk_are_planned():
    for mode in ("uefi", "auto"):
        doc = mutate(sample("uefi"), lambda d: d["bootloader"].__setitem__("boot_mode", mode))
        doc["disks"][0]["match"] = {"name": "vda"}
        build(doc, one_disk(4096, 4096))
