"""Fuel's provision.json (scaled to the bench's 3 x 4 GiB disks: samples/provision-vm.json)
provisions in the VM through the nailgun data driver, including its gzip'd ext4 root image (the
bootable test OS, served under the sample's own URL as scripts/demo serves it) streamed over
HTTP, written to the root LV and grown, and grub installed on every disk; the RAID/VG/LV
layout, the image's content and the boot code are read back. Then the same document with
Fuel's keep_data on the image VG re-provisions the machine twice: Glance's data survives both."""

import contextlib
import copy
import json
import tempfile
from pathlib import Path

from tests.vmbench import demo
from tests.vmbench.ramdisk import REPO_ROOT


def with_image_vg_kept(sample):
    """The same document with Fuel's keep_data on the image VG's pv volumes."""
    doc = copy.deepcopy(sample)
    for space in doc["ks_meta"]["pm_data"]["ks_spaces"]:
        for vol in space.get("volumes", []) if space["type"] == "disk" else []:
            if vol["type"] == "pv" and vol["vg"] == "image":
                vol["keep_data"] = True
    return doc


def test_fuel_vm_sample_provisions_and_reads_back(make_vm):
    sample = json.loads((REPO_ROOT / "samples" / "provision-vm.json").read_text())
    sizes, bus = demo.machine(sample, "nailgun")
    vm = make_vm(disks=sizes, bus=bus, serials=["disk0", "disk1", "disk2"])
    # served as scripts/demo serves it: the sample's own URL, the test OS behind it
    with contextlib.ExitStack() as stack:
        served = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        doc, srv = demo.serve_images(sample, served, stack)
        run = vm.provision(doc, ["--data_driver", "nailgun", "--debug"])
        assert run.returncode == 0, run.stderr[-3000:] + "\n" + run.log[-4000:]
        assert srv.requested == ["/testos.ext4.gz"]
        check_first_provisioning(vm)
        reprovision_keeping_the_image_vg(vm, doc)


def reprovision_keeping_the_image_vg(vm, doc, times=2):
    """Fuel's keep_data on the image VG: Glance's data survives re-provisioning, twice (a pet
    re-installed again keeps what it kept the first time), the VG is not re-created nor its
    xfs re-made, the OS beside it is written anew each time."""
    vm.ssh("mkdir -p /mnt/g && mount /dev/image/glance /mnt/g && "
           "head -c 8M /dev/urandom > /mnt/g/kept.bin && sha256sum /mnt/g/kept.bin > /tmp/kept "
           "&& umount /mnt/g")
    uuids = "vgs --noheadings -o vg_name,vg_uuid"
    for n in range(times):
        vm.ssh("mount /dev/os/root /mnt/r && touch /mnt/r/old-os && umount /mnt/r")
        before = vm.blkid()
        vgs_before = dict(ln.split() for ln in vm.ssh(uuids).stdout.splitlines())
        run = vm.provision(with_image_vg_kept(doc), ["--data_driver", "nailgun", "--debug"])
        assert run.returncode == 0, run.stderr[-3000:] + "\n" + run.log[-4000:]
        assert "keep volume group image" in run.log
        after = vm.blkid()
        vgs_after = dict(ln.split() for ln in vm.ssh(uuids).stdout.splitlines())
        # the image VG and its xfs are the same objects; the os VG beside them was made anew
        assert vgs_after["image"] == vgs_before["image"], f"re-provisioning {n + 1}"
        assert vgs_after["os"] != vgs_before["os"], f"re-provisioning {n + 1}"
        assert after["/dev/mapper/image-glance"]["UUID"] == \
            before["/dev/mapper/image-glance"]["UUID"], f"re-provisioning {n + 1}"
        vm.ssh("mount /dev/image/glance /mnt/g && sha256sum -c /tmp/kept && umount /mnt/g")
        vm.ssh("mount /dev/os/root /mnt/r")
        try:
            assert not vm.exists("/mnt/r/old-os"), f"re-provisioning {n + 1}"
            assert "/var/lib/glance" in vm.read_text("/mnt/r/etc/fstab")
        finally:
            vm.ssh("umount /mnt/r")


def check_first_provisioning(vm):
    lvs = {(lv["vg_name"], lv["lv_name"]): lv for lv in vm.lvs()}
    assert {("os", "root"), ("os", "swap"), ("image", "glance")} <= set(lvs)
    mdstat = vm.mdstat()
    assert "raid1" in mdstat and mdstat.count("vd") >= 3, mdstat
    blkid = vm.blkid()
    assert blkid["/dev/mapper/os-root"]["TYPE"] == "ext4"
    assert blkid["/dev/mapper/image-glance"]["TYPE"] == "xfs"
    vm.ssh("mkdir -p /mnt/r && mount /dev/os/root /mnt/r")
    try:
        assert vm.exists("/mnt/r/etc/systemd/system/boot-marker.service")
        size = int(vm.ssh("df -B1 --output=size /mnt/r | tail -1").stdout)
        assert size > 4 << 30, f"root filesystem not grown to its LV: {size}"
        fstab = vm.read_text("/mnt/r/etc/fstab")
        assert "/var/lib/glance" in fstab and "/boot" in fstab
    finally:
        vm.ssh("umount /mnt/r")
    # Fuel boots from any disk: grub's boot code in every MBR, its config on /boot (RAID1)
    for disk in ("/dev/vda", "/dev/vdb", "/dev/vdc"):
        mbr = vm.ssh(f"head -c 512 {disk} | grep -a -c GRUB", check=False).stdout.strip()
        assert mbr == "1", f"no GRUB boot code in the MBR of {disk}"
    vm.ssh("mkdir -p /mnt/b && mount /dev/md/boot /mnt/b")
    try:
        # the root image's /boot was copied onto the new /boot filesystem before it was mounted
        assert vm.ssh("ls /mnt/b").stdout.count("vmlinuz-") == 1
        cfg = vm.read_text("/mnt/b/grub/grub.cfg")
        assert "net.ifnames=0" in cfg and "root=UUID=" in cfg, cfg[-2000:]
    finally:
        vm.ssh("umount /mnt/b")
