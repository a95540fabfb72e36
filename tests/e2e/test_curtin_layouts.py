"""curtin's storage layouts that issue 56 added to the format, provisioned in the VM bench and
then booted from the disks alone (the test OS's marker: the chain of devices under /):

- bcache over md RAID1, cached by a partition of a third disk, as LVM's physical volume with
  `/` on an LV (a tar image: the initramfs is rebuilt with bcache-tools' hook): the cache mode
  read in the ramdisk, the booted root's chain LV -> bcacheN -> mdN (RAID1) + the cache.
- `/` on a partition of an md RAID1 (an msdos table on the array, msdos on the disks: curtin's
  mirrorboot-msdos-partition), with a jfs /srv and a reiserfs /data on the array's other
  partitions: blkid and a mount of each in the ramdisk, then the boot (systemd mounts both
  before the marker's multi-user.target).
- UEFI with a second ESP listed with its own vfat filesystem and no mount point (curtin's
  mirrorboot-uefi): the copy of the ESP made onto it, and the system booting under OVMF with
  the first disk removed, from that ESP alone.

Outside CI (`tox -e e2e-curtin`, marker `curtin`): each case provisions and boots under TCG.
Passed 2026-11-29: the bcache and md-partition cases; the second-ESP case is written and has
not run yet (the bench was busy to that session's VM deadline).
"""

import re
import time

import pytest

from tests.vmbench import FileServer, testos

pytestmark = pytest.mark.curtin

MARKER = r"PROVISION-BOOT-OK cd=\S+ mpath=\S+ root=(\S+)"
TIMES = {}


def _image(srv, path, fmt, target):
    return {"uri": srv.guest_url(path.name), "format": fmt, "target": target,
            "checksum": testos.checksum(path)}


def _boot(make_vm, vm, firmware="bios", drop_first=False):
    """Boot the provisioned disks alone (without the first if drop_first); the root chain."""
    vm.stop()
    disks = list(vm.disk_images)[1:] if drop_first else list(vm.disk_images)
    t0 = time.monotonic()
    booted = make_vm(disk_images=disks, boot="disk", firmware=firmware)
    m = booted.wait_console(MARKER, timeout=1800)
    vm.keep_disks = False
    return m.group(1).split(","), time.monotonic() - t0


def _provision(make_vm, doc, disks, firmware="bios"):
    t0 = time.monotonic()
    vm = make_vm(disks=disks, firmware=firmware, keep_disks=True)
    run = vm.provision(doc, ["--debug"])
    assert run.returncode == 0, run.log
    return vm, run, time.monotonic() - t0


def _bcache_layout(srv, tar):
    def disk(i):
        return {"id": f"disk{i}", "match": {"name": f"/dev/vd{'ab'[i]}"}, "partitions": [
            {"id": f"bios{i}", "size": "1MiB", "type": "bios_grub"},
            {"id": f"boot{i}", "size": "512MiB", "type": "raid"},
            {"id": f"os{i}", "size": "remaining", "type": "raid"}]}
    return {
        "version": 1,
        "disks": [disk(0), disk(1),
                  {"id": "ssd", "match": {"name": "/dev/vdc"},
                   "partitions": [{"id": "cache", "size": "1GiB"}]}],
        "raids": [{"id": "md-boot", "name": "boot", "level": 1, "members": ["boot0", "boot1"],
                   "metadata": "1.0"},
                  {"id": "md-os", "name": "os", "level": 1, "members": ["os0", "os1"]}],
        "bcache": [{"id": "bc-os", "name": "os", "backing_device": "md-os",
                    "cache_device": "cache", "cache_mode": "writeback"}],
        "volume_groups": [{"id": "vg-os", "name": "os", "pvs": ["bc-os"], "logical_volumes": [
            {"id": "lv-root", "name": "root", "size": "2GiB"}]}],
        "filesystems": [{"device": "md-boot", "type": "ext2", "mount": "/boot", "label": "boot"},
                        {"device": "lv-root", "type": "ext4", "mount": "/", "label": "root"}],
        "images": [_image(srv, tar, "tar", "/")],
        "bootloader": {"boot_mode": "bios", "kernel_params": "console=ttyS0"},
    }


def test_bcache_over_raid1_under_lvm_root_boots(make_vm):
    tar = testos.bcache_tar_zst()
    with FileServer(tar.parent) as srv:
        vm, run, provision_s = _provision(make_vm, _bcache_layout(srv, tar), 3)
    assert "the layout has / on bcache" in run.log, run.log
    pvs = {pv["pv_name"]: pv["vg_name"] for pv in vm.pvs()}
    bcache = [pv for pv, vg in pvs.items() if vg == "os"]
    assert len(bcache) == 1 and re.fullmatch(r"/dev/bcache\d+", bcache[0]), pvs
    name = bcache[0].rsplit("/", 1)[1]
    sysfs = f"/sys/block/{name}/bcache"
    mode = vm.read_text(f"{sysfs}/cache_mode").split()
    assert "[writeback]" in mode, mode
    state = vm.read_text(f"{sysfs}/state").strip()
    assert state in ("clean", "dirty"), state          # attached to a cache set
    # the kernel lists both under the bcache device: the backing array and the cache
    under = sorted(vm.ssh(f"ls /sys/block/{name}/slaves").stdout.split())
    assert len(under) == 2 and re.fullmatch(r"md\d+", under[0]) and under[1] == "vdc1", under

    chain, boot_s = _boot(make_vm, vm)
    TIMES["bcache-raid1-lvm"] = (provision_s, boot_s)
    assert chain[0].endswith(":lvm"), chain
    assert any(re.fullmatch(r"bcache\d+:disk", c) for c in chain), chain
    assert any(re.fullmatch(r"md\d+:raid1", c) for c in chain), chain
    assert "vdc1:part" in chain, chain              # the cache set's device, under the root
    assert {"vda3:part", "vdb3:part"} <= set(chain), chain


def _md_partition_layout(srv, image):
    def disk(i):
        return {"id": f"disk{i}", "match": {"name": f"/dev/vd{'ab'[i]}"}, "table": "msdos",
                "partitions": [{"id": f"os{i}", "size": "remaining", "type": "raid",
                                "flags": ["boot"]}]}
    return {
        "version": 1,
        "disks": [disk(0), disk(1)],
        "raids": [{"id": "md-os", "name": "os", "level": 1, "members": ["os0", "os1"],
                   "table": "msdos", "partitions": [
                       {"id": "root", "size": "2GiB"},
                       {"id": "srv", "size": "600MiB"},
                       {"id": "data", "size": "remaining"}]}],
        "filesystems": [
            {"device": "root", "type": "ext4", "mount": "/", "label": "root"},
            # the test OS has neither jfsutils nor reiserfsprogs: no fsck at boot
            {"device": "srv", "type": "jfs", "mount": "/srv", "label": "srv", "fstab_pass": 0},
            {"device": "data", "type": "reiserfs", "mount": "/data", "label": "data",
             "fstab_pass": 0}],
        "images": [_image(srv, image, "raw", "root")],
        "bootloader": {"boot_mode": "bios", "kernel_params": "console=ttyS0"},
    }


def test_root_on_a_partition_of_md_raid1_with_jfs_and_reiserfs_boots(make_vm):
    image = testos.ext4_zst()
    with FileServer(image.parent) as srv:
        vm, run, provision_s = _provision(make_vm, _md_partition_layout(srv, image), 2)
    table = vm.ssh("sfdisk --json /dev/md/os").stdout
    assert '"label":"dos"' in table.replace(" ", ""), table
    tags = vm.blkid()
    by_label = {t.get("LABEL"): (dev, t.get("TYPE")) for dev, t in tags.items()}
    assert by_label["srv"][1] == "jfs" and by_label["data"][1] == "reiserfs", by_label
    assert by_label["root"][1] == "ext4", by_label
    for label, (dev, fstype) in by_label.items():
        if label in ("srv", "data"):
            mounted = vm.ssh(f"mkdir -p /mnt/{label} && mount {dev} /mnt/{label} && "
                             f"findmnt -n -o FSTYPE /mnt/{label} && umount /mnt/{label}").stdout
            assert mounted.split() == [fstype], mounted
            assert re.fullmatch(r"/dev/md\d+p[23]", dev), dev
    fstab = vm.ssh(f"mount {by_label['root'][0]} /mnt && cat /mnt/etc/fstab; umount /mnt").stdout
    assert re.search(r"\s/srv\s+jfs\s", fstab) and re.search(r"\s/data\s+reiserfs\s", fstab), fstab

    chain, boot_s = _boot(make_vm, vm)
    TIMES["md-partition-root"] = (provision_s, boot_s)
    assert re.fullmatch(r"md\d+p1:part", chain[0]), chain
    assert re.fullmatch(r"md\d+:raid1", chain[1]), chain
    assert {"vda1:part", "vdb1:part"} <= set(chain), chain


def _second_esp_layout(srv, image):
    def disk(i):
        return {"id": f"disk{i}", "match": {"name": f"/dev/vd{'ab'[i]}"}, "partitions": [
            {"id": f"esp{i}", "size": "256MiB", "type": "esp"},
            {"id": f"os{i}", "size": "remaining", "type": "raid"}]}
    return {
        "version": 1,
        "disks": [disk(0), disk(1)],
        "raids": [{"id": "md-os", "name": "os", "level": 1, "members": ["os0", "os1"]}],
        "filesystems": [
            {"device": "esp0", "type": "vfat", "mount": "/boot/efi", "label": "EFI"},
            # curtin's mirrorboot-uefi: the second ESP formatted, mounted nowhere
            {"device": "esp1", "type": "vfat", "label": "EFI2"},
            {"device": "md-os", "type": "ext4", "mount": "/", "label": "root"}],
        "images": [_image(srv, image, "raw", "md-os")],
        "bootloader": {"boot_mode": "uefi", "kernel_params": "console=ttyS0"},
    }


def test_uefi_second_esp_listed_with_a_filesystem_boots_alone(make_vm):
    image = testos.ext4_zst()
    with FileServer(image.parent) as srv:
        vm, run, provision_s = _provision(make_vm, _second_esp_layout(srv, image), 2, "uefi")
    assert "copying the ESP onto /dev/vdb1" in run.log, run.log
    tags = vm.blkid()
    assert tags["/dev/vdb1"]["LABEL"] == "EFI2" and tags["/dev/vdb1"]["TYPE"] == "vfat", tags
    assert tags["/dev/vdb1"]["UUID"] == tags["/dev/vda1"]["UUID"], tags
    loader = vm.ssh("mount -o ro /dev/vdb1 /mnt && ls /mnt/EFI/BOOT; umount /mnt").stdout
    assert "BOOTX64.EFI" in loader.split(), loader

    chain, boot_s = _boot(make_vm, vm, firmware="uefi", drop_first=True)
    TIMES["uefi-second-esp-drop0"] = (provision_s, boot_s)
    # the first disk is gone: the second is vda now, its array degraded
    assert re.fullmatch(r"md\d+:raid1", chain[0]) and "vda2:part" in chain, chain
    assert not any(c.startswith("vdb") for c in chain), chain


@pytest.fixture(scope="module", autouse=True)
def report_times():
    yield
    for case, (p, b) in TIMES.items():
        print(f"\ncurtin layouts: {case}: provision {p:.0f} s, boot to marker {b:.0f} s")
