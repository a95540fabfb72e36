"""Default bootloader targets are derived, then checked exactly as explicit ones (issue 56):
a disk grub is planned on must be able to boot, whoever named it."""

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline
from tests.unit.helpers import mutate

NAMES = ("vda", "vdb", "vdc", "vdd")
DISKS = [inv_mod.normalize({"name": f"/dev/{n}", "size": 8 << 30}) for n in NAMES]
TAR = {"uri": "http://h/os.tar.zst", "format": "tar", "target": "/",
       "checksum": "sha256:" + "0" * 64}


def raid_boot(level, members, bios_grub_on=(0,), mode="bios", table="gpt"):
    """/boot on a RAID of `level` over one partition of each of `members` disks, / on a
    partition of the first; a bios_grub partition only on the disks in `bios_grub_on`."""
    disks = []
    for i in range(members):
        parts = [{"id": f"bios{i}", "size": "1MiB", "type": "bios_grub"}] \
            if i in bios_grub_on else []
        parts.append({"id": f"boot{i}", "size": "512MiB", "type": "raid"})
        if i == 0:
            parts.append({"id": "root", "size": "remaining"})
        disks.append({"id": f"d{i}", "match": {"name": f"/dev/{NAMES[i]}"}, "table": table,
                      "partitions": parts})
    return {"version": 1, "disks": disks,
            "raids": [{"id": "md-boot", "level": level, "metadata": "1.0",
                       "members": [f"boot{i}" for i in range(members)]}],
            "filesystems": [{"device": "md-boot", "type": "ext4", "mount": "/boot"},
                            {"device": "root", "type": "ext4", "mount": "/"}],
            "images": [TAR], "bootloader": {"boot_mode": mode}}


def problems(doc):
    with pytest.raises(InputError) as exc:
        pipeline.build_plan(NativeDriver(doc).layout(), DISKS)
    return [str(p) for p in exc.value.problems]


def bootloader_step(doc):
    planned = pipeline.build_plan(NativeDriver(doc).layout(), DISKS)
    return next(s for s in planned.steps if s.kind == "bootloader")


@pytest.mark.parametrize("level,members", [(1, 2), (5, 3), (6, 4), (10, 4)])
def test_default_targets_without_bios_grub_are_refused_as_named_ones_are(level, members):
    doc = raid_boot(level, members)
    named = mutate(doc, lambda d: d["bootloader"].__setitem__(
        "targets", [f"d{i}" for i in range(members)]))
    said = [f"BIOS boot from gpt disk 'd{i}' needs a bios_grub partition on it"
            for i in range(1, members)]
    for layout in (named, doc):
        got = problems(layout)
        assert all(any(s in p for p in got) for s in said), got
        assert not any("'d0'" in p for p in got), got


def test_a_default_target_says_why_it_is_one():
    got = problems(raid_boot(1, 2))
    assert any(p.startswith("$.bootloader: BIOS boot from gpt disk 'd1' needs a bios_grub "
                            "partition on it") and "md-boot" in p and "/boot" in p
               for p in got), got


def test_default_targets_with_a_bios_grub_on_each_disk_plan_grub_on_each():
    step = bootloader_step(raid_boot(5, 3, bios_grub_on=(0, 1, 2)))
    assert step.args["targets"] == ["/dev/vda", "/dev/vdb", "/dev/vdc"]


def test_msdos_disks_need_no_bios_grub_by_default_or_by_name():
    doc = raid_boot(1, 2, bios_grub_on=(), table="msdos")
    assert bootloader_step(doc).args["targets"] == ["/dev/vda", "/dev/vdb"]
    named = mutate(doc, lambda d: d["bootloader"].__setitem__("targets", ["d0", "d1"]))
    assert bootloader_step(named).args["targets"] == ["/dev/vda", "/dev/vdb"]


def curtin_msdos_esp():
    """curtin's ESP on an msdos disk: MBR type 0x83 with the boot flag, vfat at /boot/efi;
    / on a RAID1 across it and a second disk with a real ESP."""
    disks = [{"id": "sda", "match": {"name": "/dev/vda"}, "table": "msdos", "partitions": [
                 {"id": "sda1", "size": "512MiB", "flags": ["boot"]},
                 {"id": "sda2", "size": "3GiB", "type": "raid"}]},
             {"id": "sdb", "match": {"name": "/dev/vdb"}, "partitions": [
                 {"id": "sdb1", "size": "512MiB", "type": "esp"},
                 {"id": "sdb2", "size": "3GiB", "type": "raid"}]}]
    return {"version": 1, "disks": disks,
            "raids": [{"id": "md0", "level": 1, "members": ["sda2", "sdb2"]}],
            "filesystems": [{"device": "md0", "type": "ext4", "mount": "/"},
                            {"device": "sda1", "type": "vfat", "mount": "/boot/efi"}],
            "images": [TAR], "bootloader": {"boot_mode": "uefi"}}


def test_an_msdos_esp_of_type_linux_is_refused_by_default_as_when_named():
    doc = curtin_msdos_esp()
    named = mutate(doc, lambda d: d["bootloader"].__setitem__("targets", ["sda", "sdb"]))
    for layout in (named, doc):
        got = problems(layout)
        assert any("UEFI boot from disk 'sda' needs an esp partition on it" in p
                   for p in got), got
    fixed = mutate(doc, lambda d: d["disks"][0]["partitions"][0].__setitem__("type", "esp"))
    assert bootloader_step(fixed).args["targets"] == ["/dev/vda", "/dev/vdb"]


@pytest.mark.parametrize("doc", [raid_boot(1, 2), raid_boot(6, 4, bios_grub_on=(0, 2)),
                                 raid_boot(10, 4, mode="uefi"), curtin_msdos_esp()])
def test_the_same_problems_whether_targets_are_derived_or_named(doc):
    """One code path: naming the disks the default derives changes nothing but the words
    that say why a disk is a target."""
    from provision_agent.plan import boot_targets
    derived = boot_targets.of(NativeDriver(doc).layout())
    named = mutate(doc, lambda d: d["bootloader"].__setitem__("targets", derived))

    def core(layout):
        return sorted(p.split(" (a default target")[0] for p in problems(layout))
    assert core(doc) == core(named)


def root_on_a_partition_of_an_array(table="msdos"):
    """curtin's mirrorboot-msdos-partition: / on a partition of an md RAID1 (an msdos table on
    the array) over one partition of each disk, no /boot."""
    disks = [{"id": f"d{i}", "match": {"name": f"/dev/{NAMES[i]}"}, "table": table,
              "partitions": [{"id": f"os{i}", "size": "remaining", "type": "raid"}]}
             for i in range(2)]
    return {"version": 1, "disks": disks,
            "raids": [{"id": "md-os", "level": 1, "members": ["os0", "os1"], "table": "msdos",
                       "partitions": [{"id": "root", "size": "remaining"}]}],
            "filesystems": [{"device": "root", "type": "ext4", "mount": "/"}],
            "images": [TAR], "bootloader": {"boot_mode": "bios"}}


def test_a_root_on_a_partition_of_an_array_targets_the_arrays_disks():
    """It planned grub "on no disk" (the array's partition is no disk's): seen in the VM
    bench's md-partition boot layout before it ran."""
    step = bootloader_step(root_on_a_partition_of_an_array())
    assert step.args["targets"] == ["/dev/vda", "/dev/vdb"]
    from provision_agent.plan import boot_targets
    why = boot_targets.why(NativeDriver(root_on_a_partition_of_an_array()).layout())
    assert why["d1"] == "it holds os1, a member of md-os, whose partition root is mounted at /"


def test_under_uefi_a_root_on_an_array_partition_boots_from_the_esps():
    """curtin's raid-partition-to-disk: the ESP on one disk, / on a partition of an array over
    two disks without ESPs; grub goes on the ESP's disk only."""
    doc = root_on_a_partition_of_an_array(table="gpt")
    doc["disks"].insert(0, {"id": "e", "match": {"name": "/dev/vdc"}, "partitions": [
        {"id": "esp", "size": "512MiB", "type": "esp"}]})
    doc["filesystems"].append({"device": "esp", "type": "vfat", "mount": "/boot/efi"})
    doc["bootloader"]["boot_mode"] = "uefi"
    assert bootloader_step(doc).args["targets"] == ["/dev/vdc"]


def raid_partition_to_disk(mode):
    """curtin's raid-partition-to-disk: the ESP on its own disk, / on a partition of an array
    over two disks without ESPs."""
    doc = root_on_a_partition_of_an_array(table="gpt")
    doc["disks"].insert(0, {"id": "e", "match": {"name": "/dev/vdc"}, "partitions": [
        {"id": "esp", "size": "512MiB", "type": "esp"}]})
    doc["filesystems"].append({"device": "esp", "type": "vfat", "mount": "/boot/efi"})
    doc["bootloader"]["boot_mode"] = mode
    return doc


def test_auto_carries_the_targets_a_uefi_machine_boots_from():
    """boot_mode auto is known only in the ramdisk: the step keeps the BIOS targets (the
    array's members, whose MBRs boot it) and says which disks boot a UEFI machine, the ones
    boot_mode uefi plans; the members were a UEFI machine's targets too."""
    step = bootloader_step(raid_partition_to_disk("auto"))
    assert step.args["targets"] == ["/dev/vdc", "/dev/vda", "/dev/vdb"]
    assert step.args["uefi_targets"] == ["/dev/vdc"]
    assert "on /dev/vdc, /dev/vda, /dev/vdb (in UEFI mode on /dev/vdc)" in step.description
    assert "uefi_targets" not in bootloader_step(raid_partition_to_disk("uefi")).args
    # where both modes boot from the same disks, the plan reads as it always did
    assert "uefi_targets" not in bootloader_step(raid_boot(5, 3, bios_grub_on=(0, 1, 2),
                                                           mode="auto")).args
