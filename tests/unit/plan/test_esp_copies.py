"""Every ESP a layout lists on a disk that boots gets the loader, or the plan says why not
(issue 56: curtin's mirrorboot-uefi lists its second ESP with a filesystem, and the plan said
grub went on both disks while nothing reached the second ESP)."""

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline
from tests.unit.helpers import mutate

DISKS = [inv_mod.normalize({"name": f"/dev/{n}", "size": 8 << 30}) for n in ("vda", "vdb")]
TAR = {"uri": "http://h/os.tar.zst", "format": "tar", "target": "/",
       "checksum": "sha256:" + "0" * 64}


def mirrorboot_uefi():
    """curtin's examples/tests/mirrorboot-uefi.yaml, here (sda's ESP typed esp: see
    test_boot_targets for curtin's msdos 0x83 one): both ESPs formatted fat32 labelled efi,
    only sda's mounted at /boot/efi; / and /var on RAID1s across the disks."""
    def disk(name, dev):
        return {"id": name, "match": {"name": dev}, "partitions": [
            {"id": f"{name}-part1", "number": 1, "offset": "4194304B", "size": "511705088B",
             "type": "esp", "flags": ["boot"]},
            {"id": f"{name}-part2", "number": 2, "size": "3GiB", "type": "raid"},
            {"id": f"{name}-part3", "number": 3, "size": "1GiB", "type": "raid"}]}
    return {"version": 1, "disks": [disk("sda", "/dev/vda"), disk("sdb", "/dev/vdb")],
            "raids": [{"id": "md0", "level": 1, "members": ["sda-part2", "sdb-part2"]},
                      {"id": "md1", "level": 1, "members": ["sda-part3", "sdb-part3"]}],
            "filesystems": [
                {"device": "sda-part1", "type": "vfat", "label": "efi", "mount": "/boot/efi"},
                {"device": "sdb-part1", "type": "vfat", "label": "efi"},
                {"device": "md0", "type": "ext4", "mount": "/"},
                {"device": "md1", "type": "ext4", "mount": "/var"}],
            "images": [TAR], "bootloader": {"boot_mode": "uefi"}}


def planned(doc):
    return pipeline.build_plan(NativeDriver(doc).layout(), DISKS)


def of_kind(p, kind):
    return [s for s in p.steps if s.kind == kind]


def test_a_second_esp_listed_with_a_filesystem_gets_a_copy_of_the_loader():
    p = planned(mirrorboot_uefi())
    (bl,) = of_kind(p, "bootloader")
    assert bl.args["targets"] == ["/dev/vda", "/dev/vdb"]
    assert bl.args["esp_copies"] == ["/dev/vdb1"]
    assert "ESP copied to /dev/vdb1" in bl.description
    made = [s.args for s in of_kind(p, "mkfs") if s.args["device"] == "/dev/vdb1"]
    # made once, as listed (label, options), answering to the primary's UUID that fstab names
    assert made == [{**made[0], "fs_type": "vfat", "label": "efi",
                     "volume_id_of": "/dev/vda1"}], made
    assert "/dev/vdb1" not in [e["device"] for e in of_kind(p, "fstab")[0].args["entries"]]
    assert p.resolved.warnings == []


@pytest.mark.parametrize("change,why", [
    (lambda d: d["filesystems"][1].__setitem__("mount", "/boot/efi2"),
     "it is mounted at /boot/efi2"),
    (lambda d: d["filesystems"][1].__setitem__("type", "ext4"), "it holds ext4"),
    (lambda d: d["bootloader"].__setitem__("targets", ["sda"]),
     "its disk sdb is not a bootloader target"),
])
def test_an_esp_that_gets_no_loader_is_named_in_a_warning_with_why(change, why):
    p = planned(mutate(mirrorboot_uefi(), change))
    assert of_kind(p, "bootloader")[0].args["esp_copies"] == []
    assert [w for w in p.resolved.warnings if w.startswith("$.disks[1].partitions[0]: ESP")
            and "gets no copy of the boot loader" in w and why in w], p.resolved.warnings


def test_an_unlisted_esp_stays_a_copy_and_auto_mode_plans_the_copies():
    doc = mutate(mirrorboot_uefi(), lambda d: d["filesystems"].pop(1))
    p = planned(doc)
    assert of_kind(p, "bootloader")[0].args["esp_copies"] == ["/dev/vdb1"]
    assert [s.args["label"] for s in of_kind(p, "mkfs")
            if s.args["device"] == "/dev/vdb1"] == ["efi"]      # the primary's label
    auto = planned(mutate(mirrorboot_uefi(), lambda d: d["bootloader"].pop("boot_mode")))
    assert of_kind(auto, "bootloader")[0].args["esp_copies"] == ["/dev/vdb1"]


def test_the_members_of_an_esp_array_are_no_copies_and_no_warning():
    def md_esp(d):
        d["raids"].append({"id": "md-esp", "level": 1, "metadata": "1.0",
                           "members": ["sda-part1", "sdb-part1"]})
        d["filesystems"][0]["device"] = "md-esp"
        d["filesystems"].pop(1)
    p = planned(mutate(mirrorboot_uefi(), md_esp))
    assert of_kind(p, "bootloader")[0].args["esp_copies"] == []
    assert p.resolved.warnings == []


def test_a_kept_second_esp_is_neither_formatted_nor_copied_onto():
    """Its contents stay (keep without wipe): no mkfs, no copy, and the plan says so."""
    def kept(d):
        d["filesystems"].pop(1)
        d["disks"][1]["partitions"][0]["keep"] = True
    p = planned(mutate(mirrorboot_uefi(), kept))
    assert of_kind(p, "bootloader")[0].args["esp_copies"] == []
    assert "/dev/vdb1" not in [s.args["device"] for s in of_kind(p, "mkfs")]
    assert [w for w in p.resolved.warnings if "ESP /dev/vdb1 gets no copy" in w
            and "it is kept as it is" in w], p.resolved.warnings
