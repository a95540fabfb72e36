"""A whole-disk image's own bootloader on UEFI (bootloader type image, as the ironic data
driver gives a whole-disk image): provision makes the NVRAM entry ironic-python-agent makes
for the loader the image's ESP names, and the firmware boots the disk by that entry alone.

Outside CI (`tox -e e2e-uefi-entry`, 4-6 minutes; the first run also makes the head-to-head's
UEFI whole-disk image, 2.5 minutes more): CI's e2e suite is already past its budget on the
slower host (docs/testing.md), and the logic is covered by tests/unit/drivers/test_nvram.py,
test_esp_loader.py and the planner's and data driver's tests.
"""

import json
import os
import re
import subprocess
import time

import pytest

from tests.vmbench import FileServer, testos

MARKER = r"PROVISION-BOOT-OK cd=(\S+)"     # the test OS's, as tests/e2e/test_boot.py waits for
CSV_LABEL = "provision-e2e"


@pytest.fixture(scope="module")
def test_os():
    return testos.build_dir()


def _csv_only_uefi_image(ramdisk, test_os):
    """The head-to-head's UEFI whole-disk image (GPT, ESP, the test OS's root, the image's own
    grub) without the removable path EFI/BOOT, and with an EFI/debian/BOOTX64.CSV naming its
    grubx64.efi (shim's format, UTF-16): a disk that firmware boots only through an NVRAM
    entry, which the test OS image itself cannot get otherwise. zstd, cached beside it."""
    from benchmarks import head_to_head_image

    source = head_to_head_image.ensure_whole_disk("uefi", ramdisk, test_os)
    out = source / "disk-uefi-csv-only.raw.zst"
    if out.exists():
        return out
    raw = source / "csv-only.raw.part"
    subprocess.run(["cp", "--sparse=always", str(source / "disk-uefi.raw"), str(raw)],
                   check=True)
    try:
        table = json.loads(subprocess.run(["sfdisk", "--json", str(raw)], check=True,
                                          capture_output=True, text=True).stdout)
        esp = table["partitiontable"]["partitions"][0]
        at = f"{raw}@@{esp['start'] * 512}"
        env = dict(os.environ, MTOOLS_SKIP_CHECK="1")
        csv = source / "BOOTX64.CSV"
        csv.write_bytes(f"grubx64.efi,{CSV_LABEL},,the e2e entry\r\n".encode("utf-16"))
        subprocess.run(["mdeltree", "-i", at, "::/EFI/BOOT"], check=True, env=env)
        subprocess.run(["mcopy", "-i", at, str(csv), "::/EFI/debian/BOOTX64.CSV"], check=True,
                       env=env)
        csv.unlink()
        listing = subprocess.run(["mdir", "-/", "-b", "-i", at, "::/EFI"], check=True, env=env,
                                 capture_output=True, text=True).stdout
        assert "/EFI/BOOT" not in listing.upper() and "BOOTX64.CSV" in listing.upper(), listing
        subprocess.run(["zstd", "-q", "-T0", "-3", "-f", str(raw), "-o", f"{out}.part"],
                       check=True)
        os.rename(f"{out}.part", out)
    finally:
        raw.unlink(missing_ok=True)
    return out


def test_uefi_whole_disk_image_boots_by_the_entry_made_for_its_loader(make_vm, ramdisk, test_os):
    """Ironic's whole-disk image on its default firmware (the ironic data driver, UEFI): as
    ironic-python-agent does, provision reads the image's ESP and makes an NVRAM entry for the
    loader its BOOTX64.CSV names. The image has no removable path, so the firmware, started
    again with the provisioning VM's variables, boots it by that entry alone."""
    image = _csv_only_uefi_image(ramdisk, test_os)
    t0 = time.monotonic()
    with FileServer(image.parent) as srv:
        doc = {"node_uuid": "0b8d6a0e-5f1c-4d5e-9a3b-2c7e1f4d6a90", "boot_mode": "uefi",
               "properties": {"root_device": {"serial": "disk0"}},
               "instance_info": {"image_source": srv.guest_url(image.name),
                                 "image_disk_format": "raw", "image_os_hash_algo": "sha256",
                                 "image_os_hash_value": testos.checksum(image).split(":")[1],
                                 "root_gb": 1}}
        vm = make_vm(disks=1, disk_size="2G", firmware="uefi", keep_disks=True,
                     serials=["disk0"])
        run = vm.provision(doc, ["--data_driver", "ironic", "--debug"])
        assert run.returncode == 0, run.log
        nvram = vm.ssh(["efibootmgr", "-v"]).stdout
        vm.stop()
    provision_s = time.monotonic() - t0
    assert "EFI/debian/BOOTX64.CSV" in run.log, run.log
    entry = re.search(rf"^Boot(\w+)\* {CSV_LABEL}\t.*\\EFI\\debian\\grubx64\.efi", nvram, re.M)
    assert entry, nvram
    order = re.search(r"^BootOrder: (\S+)", nvram, re.M).group(1).split(",")
    assert order[0] == entry.group(1), nvram
    t1 = time.monotonic()
    booted = make_vm(disk_images=list(vm.disk_images), boot="disk", firmware="uefi",
                     nvram=vm.nvram_file)
    booted.wait_console(MARKER, timeout=1800)
    vm.keep_disks = False
    print(f"\nuefi whole-disk entry: provision {provision_s:.0f} s, boot to marker "
          f"{time.monotonic() - t1:.0f} s")
    # OVMF says which entry it started: ours, to the loader the CSV names
    started = re.search(r'BdsDxe: starting Boot\w+ "([^"]*)" from (\S+)', booted.console_text())
    assert started and started.group(1) == CSV_LABEL, booted.console_text()[:2000]
    assert started.group(2).endswith("\\EFI\\debian\\grubx64.efi"), started.group(0)
