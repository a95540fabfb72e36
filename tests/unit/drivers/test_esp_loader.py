"""The loader a whole-disk image's ESP names for its NVRAM entry, read from a directory laid
out as the mounted ESP (FAT keeps the names' case as written; lookups ignore it)."""

import os

import pytest

from provision_agent.drivers import esp_loader

CSV_DEBIAN = "shimx64.efi,debian,,This is the boot entry for debian\r\n"


def _files(root, *paths):
    for path in paths:
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(b"MZ")


def _csv(root, path, text, encoding="utf-16"):
    full = root / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_bytes(text.encode(encoding))


def test_the_vendors_csv_names_loader_and_label(tmp_path):
    # Debian's and Ubuntu's shim: the CSV beside shim, UTF-16 with a byte order mark
    _files(tmp_path, "EFI/debian/shimx64.efi", "EFI/debian/grubx64.efi", "EFI/BOOT/BOOTX64.EFI",
           "EFI/BOOT/fbx64.efi")
    _csv(tmp_path, "EFI/debian/BOOTX64.CSV", CSV_DEBIAN)
    got = esp_loader.find(str(tmp_path))
    assert (got.path, got.label, got.removable) == ("\\EFI\\debian\\shimx64.efi", "debian",
                                                    False)
    assert got.why == "EFI/debian/BOOTX64.CSV"


def test_a_csv_without_byte_order_mark_and_names_in_other_case(tmp_path):
    # RHEL's: "shimx64.efi,Red Hat Enterprise Linux,,..." in UTF-16LE; FAT ignores case
    _files(tmp_path, "efi/redhat/SHIMX64.EFI")
    _csv(tmp_path, "efi/redhat/bootx64.csv",
         "shimx64.efi,Red Hat Enterprise Linux,,This is the boot entry for RHEL\n", "utf-16-le")
    got = esp_loader.find(str(tmp_path))
    assert (got.path, got.label) == ("\\efi\\redhat\\SHIMX64.EFI", "Red Hat Enterprise Linux")


def test_without_a_csv_the_removable_path(tmp_path):
    _files(tmp_path, "EFI/debian/grubx64.efi", "EFI/BOOT/BOOTX64.EFI")
    got = esp_loader.find(str(tmp_path))
    assert (got.path, got.label, got.removable) == ("\\EFI\\BOOT\\BOOTX64.EFI", "instance", True)


def test_without_either_a_vendors_shim_then_grub_then_windows(tmp_path):
    _files(tmp_path, "EFI/ubuntu/grubx64.efi")
    assert esp_loader.find(str(tmp_path)).path == "\\EFI\\ubuntu\\grubx64.efi"
    _files(tmp_path, "EFI/ubuntu/shimx64.efi")
    got = esp_loader.find(str(tmp_path))
    assert (got.path, got.label) == ("\\EFI\\ubuntu\\shimx64.efi", "ubuntu")
    other = tmp_path / "win"
    _files(other, "EFI/Microsoft/Boot/bootmgfw.efi")
    got = esp_loader.find(str(other))
    assert (got.path, got.label) == ("\\EFI\\Microsoft\\Boot\\bootmgfw.efi",
                                     "Windows Boot Manager")


@pytest.mark.parametrize("layout", [[], ["EFI/debian/README"], ["EFI"], ["boot/grub/grub.cfg"]])
def test_an_esp_without_a_loader_gives_none(tmp_path, layout):
    _files(tmp_path, *layout)
    assert esp_loader.find(str(tmp_path)) is None


@pytest.mark.parametrize("named", ["..\\..\\x.efi", "../BOOT/BOOTX64.EFI", "grub.cfg",
                                   "missing.efi", "a b.efi", "\x1b[2Jx.efi", ""])
def test_a_csv_naming_anything_but_a_loader_beside_it_is_ignored(tmp_path, named):
    _files(tmp_path, "EFI/evil/grub.cfg", "EFI/BOOT/BOOTX64.EFI")
    _csv(tmp_path, "EFI/evil/BOOTX64.CSV", f"{named},evil,,\n")
    got = esp_loader.find(str(tmp_path))
    assert got.path == "\\EFI\\BOOT\\BOOTX64.EFI", got


def test_a_label_loses_control_characters_and_length(tmp_path):
    _files(tmp_path, "EFI/os/shimx64.efi")
    _csv(tmp_path, "EFI/os/BOOTX64.CSV", "shimx64.efi,\x1b[31mred\x07" + "x" * 200 + ",,\n")
    got = esp_loader.find(str(tmp_path))
    assert got.label == "[31mred" + "x" * 57
    _csv(tmp_path, "EFI/os/BOOTX64.CSV", "shimx64.efi,\x01\x02,,\n")
    assert esp_loader.find(str(tmp_path)).label == "os"      # nothing left: the vendor's name


def test_links_fifos_and_a_huge_csv_are_not_followed_or_read_whole(tmp_path):
    outside = tmp_path / "outside"
    _files(outside, "shimx64.efi")
    esp = tmp_path / "esp"
    (esp / "EFI" / "linked").mkdir(parents=True)
    os.symlink(outside / "shimx64.efi", esp / "EFI" / "linked" / "shimx64.efi")
    os.symlink(outside, esp / "EFI" / "dirlink")
    os.mkfifo(esp / "EFI" / "linked" / "BOOTX64.CSV")
    assert esp_loader.find(str(esp)) is None
    # a CSV past the read limit: its first line still counts, the rest is never read
    _files(esp, "EFI/big/shimx64.efi")
    _csv(esp, "EFI/big/BOOTX64.CSV", "shimx64.efi,big,,\n" + "y" * (1 << 20))
    assert esp_loader.find(str(esp)).label == "big"


def test_a_listing_is_cut_at_its_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(esp_loader, "MAX_ENTRIES", 4)
    _files(tmp_path, *[f"EFI/a{i}/README" for i in range(6)], "EFI/zz/BOOTX64.CSV")
    _csv(tmp_path, "EFI/zz/BOOTX64.CSV", "shimx64.efi,zz,,\n")
    _files(tmp_path, "EFI/zz/shimx64.efi")
    # the fifth name onwards (sorted) is not looked at
    assert esp_loader.find(str(tmp_path)) is None
