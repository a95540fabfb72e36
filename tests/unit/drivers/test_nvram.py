"""NVRAM boot entries: efibootmgr's listing read back, a re-deploy's entry of the same name
replaced unless it boots a disk the run did not write, and a whole-disk image's entry."""

import json
import os

import pytest

from provision_agent.drivers import esp_loader, nvram
from provision_agent.errors import CommandError, ImageError
from provision_agent.run.runner import Result

OLD = "6a6e0d2e-0b55-4b51-9c5e-1f0b7a2c9d11"
OTHER = "0f7c6e5d-4b3a-4291-8f7e-6d5c4b3a2910"
LISTING = f"""BootCurrent: 0001
Timeout: 0 seconds
BootOrder: 0004,0003,0001,0000
Boot0000* UiApp\tFvVol(7cb8bdc9-f8eb-4f34-aaea-3ee4af6516a1)/FvFile(462caa21-7614-4503)
Boot0001* UEFI PXEv4 (MAC:525400123456)\tPciRoot(0x0)/Pci(0x3,0x0)/MAC(525400123456,1)
Boot0003* debian\tHD(1,GPT,{OLD.upper()},0x800,0x100000)/File(\\EFI\\debian\\shimx64.efi)
Boot0004* debian\tHD(2,GPT,{OTHER},0x800,0x100000)/File(\\EFI\\debian\\shimx64.efi)
Boot0005  windows\tHD(1,MBR,0x1234abcd,0x800,0x100000)/File(\\EFI\\Microsoft\\Boot\\x.efi)
"""


class Runner:
    def __init__(self, outputs=None, fail=()):
        self.calls = []
        self.outputs = outputs or {}
        self.fail = fail

    def run(self, argv, check=True, **kw):
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        if check and any(word in argv for word in self.fail):
            raise CommandError(argv, 1, stderr="Could not prepare Boot variable")
        return Result(tuple(argv), 0, self.outputs.get(tuple(argv[:2]), ""), "", 0.0)

    def made(self):
        return [c for c in self.calls if c[:1] == ["efibootmgr"] and "-c" in c]

    def removed(self):
        return [c[c.index("-b") + 1] for c in self.calls if "-B" in c]


def test_the_listing_gives_number_label_and_partition():
    got = nvram.listed(Runner({("efibootmgr", "-v"): LISTING}))
    assert got == [("0000", "UiApp", None), ("0001", "UEFI PXEv4 (MAC:525400123456)", None),
                   ("0003", "debian", OLD), ("0004", "debian", OTHER),
                   ("0005", "windows", "1234abcd-01")]


def _by_partuuid(tmp_path, links):
    """/dev/disk/by-partuuid and /sys/class/block as the kernel lays them out."""
    by, sys_block = tmp_path / "by-partuuid", tmp_path / "class"
    by.mkdir()
    sys_block.mkdir()
    for uuid, (disk, part) in links.items():
        node = tmp_path / "devices" / disk / part
        node.mkdir(parents=True, exist_ok=True)
        os.symlink(node, sys_block / part)
        os.symlink(tmp_path / "dev" / part, by / uuid)
    return str(by), str(sys_block)


def test_partitions_elsewhere_are_those_on_other_disks(tmp_path):
    by, sys_block = _by_partuuid(tmp_path, {OTHER: ("sdb", "sdb2"), "abc": ("vda", "vda1")})
    got = nvram.partuuids_elsewhere(["/dev/vda"], by, sys_block)
    assert got == {OTHER}


def test_an_entry_of_the_same_name_goes_unless_it_boots_another_disk(monkeypatch):
    monkeypatch.setattr(nvram, "partuuids_elsewhere", lambda disks: {OTHER})
    r = Runner({("efibootmgr", "-v"): LISTING})
    nvram.write_entries(r, [("/dev/vda", 1, "debian", "\\EFI\\debian\\shimx64.efi")],
                        ["/dev/vda"])
    # 0003 started a partition no disk has now (the last deploy's); 0004 boots another disk
    assert r.removed() == ["0003"]
    assert r.made() == [["efibootmgr", "-q", "-c", "-d", "/dev/vda", "-p", "1", "-L", "debian",
                         "-l", "\\EFI\\debian\\shimx64.efi"]]


def test_entries_are_made_last_first_so_the_first_boots_first(monkeypatch):
    monkeypatch.setattr(nvram, "partuuids_elsewhere", lambda disks: set())
    r = Runner()
    nvram.write_entries(r, [("/dev/vda", 1, "a", "\\x"), ("/dev/vdb", 1, "b", "\\x")],
                        ["/dev/vda", "/dev/vdb"])
    assert [c[c.index("-L") + 1] for c in r.made()] == ["b", "a"]
    assert r.removed() == []


TABLE = {"partitiontable": {"label": "gpt", "partitions": [
    {"node": "/dev/vda1", "start": 2048, "size": 262144,
     "type": "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"},
    {"node": "/dev/vda2", "start": 264192, "size": 2000000,
     "type": "0FC63DAF-8483-4772-8E79-3D69D8477DE4"}]}}


@pytest.fixture
def image_disk(monkeypatch):
    """A UEFI-booted ramdisk whose /dev/vda holds TABLE; the ESP's loader is what the test
    puts in `found`."""
    found = {}
    monkeypatch.setattr(nvram, "efi_booted", lambda: True)
    monkeypatch.setattr(nvram, "partuuids_elsewhere", lambda disks: set())
    monkeypatch.setattr(nvram.udev, "reread_partitions", lambda runner, disk, expected: None)
    monkeypatch.setattr(nvram.udev, "wait_for_devices", lambda runner, devices: None)
    monkeypatch.setattr(nvram.udev, "partition_node", lambda disk, number: f"{disk}{number}")
    monkeypatch.setattr(nvram.esp_loader, "find", lambda path: found.get("loader"))
    return found


def _image_runner(table=TABLE, fail=()):
    return Runner({("sfdisk", "--json"): json.dumps(table)}, fail=fail)


def test_a_whole_disk_images_csv_loader_gets_its_entry(image_disk):
    image_disk["loader"] = esp_loader.Loader(("EFI", "debian", "shimx64.efi"), "debian")
    r = _image_runner()
    nvram.image_entries(r, "uefi", ["/dev/vda"])
    mount = next(c for c in r.calls if c[0] == "mount")
    assert mount[1:5] == ["-t", "vfat", "-o", "ro,nosuid,nodev,noexec"] and mount[5] == "/dev/vda1"
    assert any(c[0] == "umount" for c in r.calls)
    assert r.made() == [["efibootmgr", "-q", "-c", "-d", "/dev/vda", "-p", "1", "-L", "debian",
                         "-l", "\\EFI\\debian\\shimx64.efi"]]


def test_a_failed_entry_fails_the_run_unless_the_removable_path_boots_anyway(image_disk):
    image_disk["loader"] = esp_loader.Loader(("EFI", "debian", "shimx64.efi"), "debian")
    with pytest.raises(CommandError):
        nvram.image_entries(_image_runner(fail=("-c",)), "uefi", ["/dev/vda"])
    image_disk["loader"] = esp_loader.Loader(("EFI", "BOOT", "BOOTX64.EFI"), "instance",
                                             removable=True)
    r = _image_runner(fail=("-c",))
    nvram.image_entries(r, "uefi", ["/dev/vda"])
    assert len(r.made()) == 1


def test_an_image_without_an_esp_cannot_boot_in_uefi_mode(image_disk):
    table = {"partitiontable": {"label": "gpt", "partitions": TABLE["partitiontable"][
        "partitions"][1:]}}
    with pytest.raises(ImageError, match="no EFI system partition"):
        nvram.image_entries(_image_runner(table), "uefi", ["/dev/vda"])
    with pytest.raises(ImageError):
        nvram.image_entries(Runner(), "uefi", ["/dev/vda"])      # no table at all


def test_an_empty_esp_gets_no_entry_and_no_failure(image_disk, caplog):
    r = _image_runner()
    nvram.image_entries(r, "uefi", ["/dev/vda"])
    assert r.made() == [] and "holds no loader" in caplog.text
    assert not [c for c in r.calls if c[0] == "efibootmgr"]      # nothing to make: not asked


def test_an_msdos_images_esp_is_found_by_its_type_byte(image_disk):
    image_disk["loader"] = esp_loader.Loader(("EFI", "BOOT", "BOOTX64.EFI"), "instance", True)
    table = {"partitiontable": {"label": "dos", "partitions": [
        {"node": "/dev/sda1", "start": 2048, "size": 1000, "type": "83"},
        {"node": "/dev/sda2", "start": 4096, "size": 1000, "type": "ef"}]}}
    r = _image_runner(table)
    nvram.image_entries(r, "uefi", ["/dev/sda"])
    assert r.made()[0][4:7] == ["/dev/sda", "-p", "2"]


def test_bios_or_a_ramdisk_without_efivars_leaves_nvram_alone(image_disk, monkeypatch, caplog):
    r = _image_runner()
    nvram.image_entries(r, "bios", ["/dev/vda"])
    assert r.calls == []
    monkeypatch.setattr(nvram, "efi_booted", lambda: False)
    nvram.image_entries(r, "uefi", ["/dev/vda"])
    assert r.calls == [] and "did not boot in UEFI mode" in caplog.text


def test_the_table_a_4kn_image_disk_should_show_is_given_in_sysfs_units(image_disk,
                                                                        monkeypatch):
    """sfdisk counts the disk's 4096-byte sectors, sysfs 512-byte units: compared as they
    are, the kernel's view never matched and partprobe ran every time."""
    seen = []
    monkeypatch.setattr(nvram.udev, "reread_partitions",
                        lambda runner, disk, expected: seen.append(expected))
    table = json.loads(json.dumps(TABLE))
    table["partitiontable"]["sectorsize"] = 4096
    nvram.image_entries(_image_runner(table), "uefi", ["/dev/vda"])
    assert seen == [{1: (2048 * 8, 262144 * 8), 2: (264192 * 8, 2000000 * 8)}]
