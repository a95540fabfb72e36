"""Provision in the ramdisk VM, power off, boot the disks alone and wait for the test OS marker.

Needs the whole chain: executor dispatching bootloader/configdrive, the image pipeline, the
bench. The test OS comes from tests/images/build-debian.sh (cached by script hash).
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import time
import typing

import pytest

from tests.vmbench import VM, FileServer, testos

HERE = pathlib.Path(__file__).resolve().parent
SAMPLES = HERE.parent.parent / "samples"
MARKER = r"PROVISION-BOOT-OK cd=(\S+)"
TIMES = {}


@pytest.fixture(scope="module", autouse=True)
def report_times(request):
    """The closing numbers the issue asks for: provision and marker seconds per case."""
    yield
    if not TIMES:
        return
    out = HERE.parent.parent / "artifacts" / "vmbench"
    out.mkdir(parents=True, exist_ok=True)
    # two workers (tox -e e2e) each write the cases they ran
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    (out / (f"boot-times-{worker}.json" if worker else "boot-times.json")).write_text(json.dumps(
        {case: {"provision_s": p and round(p, 1), "marker_s": round(b, 1)}
         for case, (p, b) in TIMES.items()}, indent=1) + "\n")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():     # module teardown output is captured otherwise
        print()
        for case, (p, b) in TIMES.items():
            prov = "shared with the case before" if p is None else f"{p:.0f} s"
            print(f"boot times: {case}: provision {prov}, boot to marker {b:.0f} s")


@pytest.fixture(scope="session")
def test_os():
    return testos.build_dir()



def _grub_programs(listing):
    return [n for n in listing if n.startswith(("./usr/sbin/grub-", "./usr/bin/grub-"))]


def _ext4_without_grub(test_os):
    """The test OS's ext4 root minus every grub program: an image that leaves the bootloader
    to the ramdisk, written as it is, so that its own initramfs is kept (a tar image's is
    rebuilt: 200 s of update-initramfs under TCG, which the multipath boot already pays for
    a rebuilt initramfs on LVM). Made with debugfs, no mount, and cached next to the test OS
    under its key."""
    out = test_os / "root-nogrub.ext4.zst"
    if not out.exists():
        listing = subprocess.run(["tar", "--zstd", "-tf", str(test_os / "root.tar.zst")],
                                 check=True, capture_output=True, text=True).stdout.split()
        assert "./usr/sbin/update-initramfs" in listing
        plain = test_os / "root-nogrub.ext4.part"
        subprocess.run(["zstd", "-q", "-d", "-f", str(test_os / "root.ext4.zst"), "-o",
                        str(plain)], check=True)
        script = "".join(f"rm {name[1:]}\n" for name in _grub_programs(listing))
        subprocess.run(["debugfs", "-w", "-f", "-", str(plain)], input=script, text=True,
                       check=True, capture_output=True)
        subprocess.run(["e2fsck", "-fn", str(plain)], check=True, capture_output=True)
        left = subprocess.run(["debugfs", "-R", "ls /usr/sbin", str(plain)], check=True,
                              capture_output=True, text=True).stdout
        assert "grub-install" not in left and "update-initramfs" in left, left
        subprocess.run(["zstd", "-q", "-T0", "--rm", "-f", str(plain), "-o", str(out) + ".part"],
                       check=True)
        pathlib.Path(str(out) + ".part").rename(out)
    return out


def _doc(sample, srv, test_os, root_target):
    doc = json.loads((SAMPLES / sample).read_text())
    tar = test_os / "root.tar.zst"
    doc["images"] = [{"uri": srv.guest_url(tar.name), "format": "tar", "target": root_target,
                      "checksum": testos.checksum(tar)}]
    doc.setdefault("bootloader", {})["kernel_params"] = "console=ttyS0"
    doc["configdrive"] = {"format": "config-2", "meta_data": {"uuid": "boot-e2e"}}
    return doc


class Booted(typing.NamedTuple):
    provision_s: float
    boot_s: float
    marker: re.Match
    log: str            # provision's log
    seen: object        # what `inspect` read in the provisioning VM


def _provision_then_boot(make_vm, doc, firmware, disks, drop_first=False, inspect=None,
                         provision_args=("--debug",)):
    """Provision, optionally `inspect(vm)` before power-off, then boot from the disks alone
    (without the first one if drop_first) and wait for the marker."""
    t0 = time.monotonic()
    # The samples' serials (disk0, ...), as their inventories and scripts/demo have them.
    vm = make_vm(disks=disks, disk_size="4G", firmware=firmware, keep_disks=True,
                 serials=[f"disk{i}" for i in range(disks)])
    run = vm.provision(doc, list(provision_args))
    assert run.returncode == 0, run.log
    seen = inspect(vm) if inspect else None
    vm.stop()
    provision_s = time.monotonic() - t0
    images = list(vm.disk_images)[1:] if drop_first else list(vm.disk_images)
    t1 = time.monotonic()
    booted = make_vm(disk_images=images, boot="disk", firmware=firmware)
    m = booted.wait_console(MARKER, timeout=1800)
    vm.keep_disks = False       # proven: the fixture's teardown may remove the images now
    return Booted(provision_s, time.monotonic() - t1, m, run.log, seen)


@pytest.fixture(scope="module")
def raid1_disks(ramdisk, test_os):
    """Two disks provisioned for the boot with disk 1 gone (like a disk that died). The test
    OS's ext4 is written as it is into the LV on md RAID1 (its /boot copied into the md /boot),
    so the image's own initramfs is kept: it must assemble the degraded array and activate
    the LV itself, as it does under ironic-python-agent. A rebuilt initramfs boots LVM with an
    md /boot in the multipath case (tests/e2e/test_multipath.py), and LVM on LUKS on md RAID1
    in `tox -e e2e-crypt`."""
    t0 = time.monotonic()
    vm = VM(disks=2, disk_size="4G", name="raid1-provision", ramdisk=ramdisk, keep_disks=True)
    image = test_os / "root.ext4.zst"
    with FileServer(test_os) as srv, vm:
        doc = _doc("two-disk-raid-lvm.json", srv, test_os, "/")
        doc["images"] = [{"uri": srv.guest_url(image.name), "format": "raw",
                          "target": "lv-root", "checksum": testos.checksum(image)}]
        run = vm.provision(doc, ["--debug"])
        assert run.returncode == 0, run.log
        vm.stop()
    assert "initramfs: the image's own is kept" in run.log, run.log
    yield list(vm.disk_images), time.monotonic() - t0
    shutil.rmtree(vm.workdir, ignore_errors=True)


def test_bios_raid1_boot_lvm_root_with_disk_1_removed(make_vm, raid1_disks):
    """The same layout booted from both disks, and samples/uefi.json booted under OVMF, are
    the Ironic power cycle's instance boots (tests/ironic/lab/test_power_cycle.py, CI's ironic
    suite): Ironic deploys them and boots them from disk through the BMC."""
    disks, provision_s = raid1_disks
    t1 = time.monotonic()
    booted = make_vm(disk_images=disks[1:], boot="disk")
    m = booted.wait_console(MARKER, timeout=1800)
    TIMES["bios-raid1-drop1"] = (provision_s, time.monotonic() - t1)
    # the configdrive lives on the first disk: gone when that disk is removed
    assert m.group(1) == "none"


def _uefi_second_disk_alone(make_vm, doc, case):
    """Provision two disks under OVMF, then boot the second disk on its own. Returns the
    provision log and the efibootmgr listing of the provisioning VM: the NVRAM entries live in
    that VM's firmware (the disk-only boot starts from fresh variables and so proves the
    removable path instead)."""
    got = _provision_then_boot(make_vm, doc, "uefi", 2, drop_first=True,
                               inspect=lambda vm: vm.ssh(["efibootmgr"]).stdout)
    TIMES[case] = (got.provision_s, got.boot_s)
    # the configdrive lives on the first disk: gone with it
    assert got.marker.group(1) == "none"
    return got.log, got.seen


def _nvram_has(nvram, label):
    return re.search(rf"^Boot\w+\* {re.escape(label)}(\t|$)", nvram, re.M)


def test_uefi_esp_copy_lets_the_second_disk_boot_alone_with_the_ramdisks_grub(make_vm, test_os):
    """ESP on each disk, root LVM on RAID1; the image has no grub at all. The ESP that the
    ramdisk's grub-install filled is copied to the second disk's ESP, so the second disk boots
    once the first is gone (OVMF falls back to EFI/BOOT/BOOTX64.EFI). The marker only prints in
    multi-user.target, after local-fs.target: fstab's /boot/efi by UUID must find the copy (it
    did not before copies took the primary's volume ID: emergency mode). The image's ext4 is
    written as it is (its /var copied into the var LV), so its own initramfs, which carries
    mdadm and lvm, is kept; the multipath boot proves a rebuilt one on LVM."""
    image = _ext4_without_grub(test_os)
    with FileServer(test_os) as srv:
        doc = _doc("uefi-two-disk-raid-lvm.json", srv, test_os, "/")
        doc["images"] = [{"uri": srv.guest_url(image.name), "format": "raw",
                          "target": "lv-root", "checksum": testos.checksum(image)}]
        log, nvram = _uefi_second_disk_alone(make_vm, doc, "uefi-esp-copy-drop0")
    assert "grub-install from the ramdisk" in log
    assert "wrote a minimal" in log
    assert "copying the ESP onto /dev/vdb1" in log
    assert "initramfs: the image's own is kept" in log, log
    assert _nvram_has(nvram, "debian") and _nvram_has(nvram, "debian (/dev/vdb)"), nvram


def test_uefi_esp_on_md_raid1_lets_the_second_disk_boot_alone(make_vm, test_os):
    """The other way to mirror an ESP: md RAID1 with metadata 1.0 over both ESP partitions,
    the image's own grub, one NVRAM entry per member. The test OS's ext4 is written as it is
    into the LV (its /var copied into the var LV), so its own initramfs, which carries mdadm
    and lvm, is kept: a rebuild would cost this case its longest step (5-6 of its 11 minutes
    under TCG on a slow host), and the multipath case proves a rebuilt one."""
    image = test_os / "root.ext4.zst"
    with FileServer(test_os) as srv:
        doc = _doc("uefi-two-disk-raid-lvm.json", srv, test_os, "/")
        doc["images"] = [{"uri": srv.guest_url(image.name), "format": "raw",
                          "target": "lv-root", "checksum": testos.checksum(image)}]
        doc["raids"].append({"id": "md-esp", "name": "esp", "level": 1,
                             "members": ["esp0", "esp1"], "metadata": "1.0"})
        doc["filesystems"][0]["device"] = "md-esp"
        log, nvram = _uefi_second_disk_alone(make_vm, doc, "uefi-md-esp-drop0")
    assert "grub-install from the image" in log
    assert "copying the ESP" not in log
    assert "initramfs: the image's own is kept" in log, log
    assert _nvram_has(nvram, "debian") and _nvram_has(nvram, "debian (/dev/vdb)"), nvram


def test_uefi_ironic_partition_image_boots_with_the_images_own_initramfs(make_vm, test_os):
    """Ironic's partition image on its default firmware: the classic layout (ESP, swap,
    ephemeral, root) by the ironic data driver, the test OS's ext4 written as it is. Nothing
    this run makes has to be in the initramfs (no md, LVM, encryption or multipath), so the
    image's own is kept, as ironic-python-agent does: no update-initramfs, minutes less under
    emulation; the system must still boot by it."""
    image = test_os / "root.ext4.zst"
    with FileServer(test_os) as srv:
        doc = json.loads((SAMPLES / "ironic-partition-image.json").read_text())
        doc["boot_mode"] = "uefi"
        doc["instance_info"].update(
            image_source=srv.guest_url(image.name),
            image_os_hash_value=testos.checksum(image).split(":", 1)[1])
        doc["instance_info"]["capabilities"] = {"disk_label": "gpt"}
        got = _provision_then_boot(make_vm, doc, "uefi", 1,
                                   provision_args=["--data_driver", "ironic", "--debug"])
    TIMES["uefi-ironic-partition-image"] = (got.provision_s, got.boot_s)
    assert "initramfs: the image's own is kept" in got.log
    assert not re.search(r"run: .*(update-initramfs|dracut)", got.log), "the initramfs was rebuilt"
    assert got.marker.group(1) != "none"

