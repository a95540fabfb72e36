"""Multipath and NVMe disks in the VM bench.

qemu shows one disk image through two SCSI devices on two HBAs with the same serial and WWN
(sda, sdb): the ramdisk's multipathd makes them one dm-multipath disk. Next to it a plain
virtio disk and an NVMe disk. One VM serves the module, in order:
  - inventory: the multipath disk listed once, its two paths under it, NVMe by its own name;
  - a layout naming one path (/dev/sda) exits 3 and writes nothing;
  - root on LVM over the multipath disk, /boot RAID1 across it and the plain disk, a
    partitioned NVMe disk, the test OS installed; read back in the VM; then the installed
    system boots with one of the two paths removed and finds its root on multipath.
The install is also the VM's containment proof (the image is tests/e2e/hostile.py's): the
image's etc/fstab is a link to an absolute path, a kernel parameter carries quotes and a blank
(it used to empty GRUB_CMDLINE_LINUX and lose root=), the image's initramfs hook, run as root
in provision's chroot, reaches neither the conductor's job file in the ramdisk's /run nor the
ramdisk's root through /proc/1/root, and the ramdisk's console line shows its kernel command
line without the agent token. It rode on a BIOS single-disk boot of its own before, 12
minutes of CI's VM time on a slow host for a second initramfs rebuild.
"""

import shutil
import time

import pytest

from tests.e2e import hostile
from tests.vmbench import VM, FileServer, testos

SERIALS = ["mpath0", "disk1", "nvme0"]
BUSES = ["multipath", "virtio", "nvme"]
MARKER = r"PROVISION-BOOT-OK cd=(\S+) mpath=(\S+) root=(\S+)"
TOKEN = "AgentTokenFromIronic0123456789"
PARAMS = 'console=ttyS0 acpi_osi="!Windows 2015"'


@pytest.fixture(scope="module")
def vm(ramdisk):
    with VM(disks=["4G", "4G", "2G"], bus=BUSES, serials=SERIALS, name="multipath",
            ramdisk=ramdisk, keep_disks=True, append=f"ipa-agent-token={TOKEN}") as machine:
        yield machine
    shutil.rmtree(machine.workdir, ignore_errors=True)     # kept for the boot with one path


@pytest.fixture(scope="module")
def mpath(vm):
    disks = vm.inventory()["inventory"]["disks"]
    found = [d for d in disks if d.get("multipath")]
    assert len(found) == 1, disks
    return found[0]


def _layout(mp_match):
    return {
        "version": 1,
        "disks": [
            {"id": "mp", "match": mp_match, "partitions": [
                {"id": "bios0", "size": "1MiB", "type": "bios_grub"},
                {"id": "boot0", "size": "256MiB", "type": "raid"},
                {"id": "os0", "size": "remaining", "type": "lvm"}]},
            {"id": "plain", "match": {"serial": "disk1"}, "partitions": [
                {"id": "bios1", "size": "1MiB", "type": "bios_grub"},
                {"id": "boot1", "size": "256MiB", "type": "raid"}]},
            {"id": "nv", "match": {"serial": "nvme0"}, "partitions": [
                {"id": "nv1", "size": "512MiB", "type": "linux"},
                {"id": "nv2", "size": "remaining", "type": "linux"}]}],
        "raids": [{"id": "md-boot", "name": "boot", "level": 1, "members": ["boot0", "boot1"],
                   "metadata": "1.0"}],
        "volume_groups": [{"id": "vg-os", "name": "os", "pvs": ["os0"], "logical_volumes": [
            {"id": "lv-root", "name": "root", "size": "2560MiB"},
            {"id": "lv-var", "name": "var", "size": "remaining"}]}],
        "filesystems": [
            {"device": "md-boot", "type": "ext2", "mount": "/boot", "label": "boot"},
            {"device": "lv-root", "type": "ext4", "mount": "/", "label": "root"},
            {"device": "lv-var", "type": "xfs", "mount": "/var/lib/data", "label": "data"},
            {"device": "nv1", "type": "ext4", "mount": "/srv/nvme", "label": "nvme"},
            {"device": "nv2", "type": "xfs", "mount": "/srv/scratch", "label": "scratch"}],
    }


def test_inventory_lists_the_multipath_disk_once(vm, mpath):
    names = [d["name"] for d in vm.inventory()["inventory"]["disks"]]
    assert mpath["name"].startswith("/dev/mapper/")
    paths = [p["name"] for p in mpath["multipath"]["paths"]]
    assert len(paths) == 2 and all(p.startswith("/dev/sd") for p in paths), mpath
    assert not set(paths) & set(names), names           # a path is never a disk of its own
    assert len({p["by_path"] for p in mpath["multipath"]["paths"]}) == 2
    assert mpath["wwn"] and mpath["serial"]
    assert f"/dev/disk/by-id/dm-uuid-mpath-{mpath['multipath']['wwid']}" in mpath["by_id"]
    assert "/dev/nvme0n1" in names


def test_a_layout_naming_one_path_exits_3_and_writes_nothing(vm, mpath):
    path = mpath["multipath"]["paths"][0]["name"]
    run = vm.provision(_layout({"name": path}))
    assert run.returncode == 3, run.stderr
    assert f"{path} is one path of multipath disk {mpath['name']}" in run.stderr
    # nothing written: no table on the disk, the first MiB of its image still zeros
    assert vm.ssh(["sfdisk", "--dump", mpath["name"]], check=False).returncode != 0
    with open(vm.disk_images[0], "rb") as f:
        assert f.read(1 << 20) == bytes(1 << 20)


def _node(nodes, path):
    for n in nodes:
        if n["path"] == path:
            return n
        found = _node(n.get("children") or [], path)
        if found:
            return found
    return None



def test_root_lvm_on_multipath_boots_with_one_path_removed(vm, mpath, ramdisk):
    wwid = mpath["multipath"]["wwid"]
    by_path = mpath["multipath"]["paths"][1]["by_path"]
    test_os = testos.build_dir()
    tar = hostile.tar(test_os)
    hostile.prepare(vm)
    with FileServer(test_os) as srv:
        # a root device hint written for the second path finds the multipath disk
        doc = _layout({"by_path": by_path})
        doc["images"] = [{"uri": srv.guest_url(tar.name), "format": "tar", "target": "/",
                          "checksum": testos.checksum(tar)}]
        doc["bootloader"] = {"boot_mode": "bios", "kernel_params": PARAMS}
        t0 = time.monotonic()
        run = vm.provision(doc, ["--debug"])
        provision_s = time.monotonic() - t0
    assert run.returncode == 0, run.log
    part = f"/dev/disk/by-id/dm-uuid-part{{}}-mpath-{wwid}"

    # read back in the VM: both paths active, partitions as dm maps, the stack on top
    mp_ll = vm.ssh(["multipath", "-ll", mpath["name"]]).stdout
    assert wwid in mp_ll and mp_ll.count("active ready running") == 2, mp_ll
    tree = _node(vm.lsblk(), mpath["name"])      # under each of its paths: sda, sdb
    assert tree["type"] == "mpath"
    assert [c["type"] for c in tree["children"]] == ["part", "part", "part"], tree
    pvs = {p["vg_name"]: p["pv_name"] for p in vm.pvs()}
    assert vm.ssh(["readlink", "-f", pvs["os"]]).stdout == \
        vm.ssh(["readlink", "-f", part.format(3)]).stdout
    md = vm.mdadm_detail("/dev/md/boot")
    assert "active sync" in md and "/dev/vda2" in md, md
    blkid = vm.blkid()
    labels = {tags.get("LABEL"): dev for dev, tags in blkid.items()}
    assert labels["nvme"] == "/dev/nvme0n1p1" and labels["scratch"] == "/dev/nvme0n1p2"
    seen = hostile.seen(vm, "/dev/os/root")
    fstab = seen["target fstab"]
    assert fstab.startswith("/etc/fstab.real\n"), "the image's fstab link was replaced or followed"
    assert fstab.count("UUID=") == 5 and "/dev/" not in fstab, fstab
    wwids = vm.ssh("mount /dev/os/root /mnt && cat /mnt/etc/multipath/wwids; umount /mnt").stdout
    assert f"/{wwid}/" in wwids
    _contained(seen, vm.console_text())
    vm.stop()

    # boot the disks alone, the multipath disk through one path only (its first HBA)
    t1 = time.monotonic()
    with VM(disk_images=vm.disk_images, bus=["scsi", "virtio", "nvme"], serials=SERIALS,
            boot="disk", name="multipath-boot", ramdisk=ramdisk) as booted:
        m = booted.wait_console(MARKER, timeout=1800)
        console = booted.console_text()
    boot_s = time.monotonic() - t1
    print(f"\nmultipath: provision {provision_s:.0f} s, boot to marker with one path "
          f"{boot_s:.0f} s; marker {m.group(0)}")
    assert wwid in m.group(2) or m.group(2).startswith("mpath"), m.group(0)
    chain = m.group(3).split(",")
    assert chain[0].endswith(":lvm") and any(c.endswith(":mpath") for c in chain), chain
    cmdline = next(ln for ln in console.splitlines() if "Command line:" in ln)
    assert "root=UUID=" in cmdline and "!Windows 2015" in cmdline, cmdline


def _contained(seen, ramdisk_console):
    """What the hostile image reached of the ramdisk (tests/e2e/hostile.py)."""
    assert seen["ramdisk fstab"] == "clean", "provision followed the image's link out of the target"
    assert seen["probe"].get("pid1"), f"the image's hook did not run: {seen}"
    assert seen["probe"]["job"] == seen["probe"]["via-pid1"] == "absent", seen
    assert seen["probe"]["ramdisk-root"] == "absent", seen
    assert seen["probe"]["escape"] == "absent", seen       # leaving the chroot ends in it
    assert int(seen["probe"]["udev-entries"]) > 0, seen      # the tools still get udev's view
    assert seen["job file"] == hostile.JOB_TEXT, seen
    said = next(ln for ln in ramdisk_console.splitlines() if "provision-ramdisk: kernel" in ln)
    assert "ipa-agent-token=<redacted>" in said and "sshkey=" in said, said
    assert TOKEN not in "\n".join(ln for ln in ramdisk_console.splitlines()
                                  if "provision-ramdisk" in ln)
