"""Fuel's provision.json (scaled to the bench's 3 x 4 GiB disks) provisions in the VM through
the nailgun data driver, including its gzip'd ext4 root image (the bootable test OS) streamed
over HTTP, written to the root LV and grown, and grub installed on every disk; the RAID/VG/LV
layout, the image's content and the boot code are read back."""

import json
import os
import subprocess
from pathlib import Path

from tests.vmbench import FileServer
from tests.vmbench.ramdisk import REPO_ROOT


def fuel_image():
    """The bootable test OS (tests/images/build-debian.sh, cached) as Fuel ships root images:
    a gzip'd ext4. Kept next to the cached test OS, so it is made once per test-OS build."""
    out = Path(subprocess.run([str(REPO_ROOT / "tests" / "images" / "build-debian.sh")],
                              check=True, capture_output=True, text=True,
                              timeout=3600).stdout.strip())
    gz = out / "root.ext4.gz"
    if not gz.exists():
        part = out / f".root.ext4.gz.{os.getpid()}"
        with open(part, "wb") as dst:
            unzstd = subprocess.Popen(["zstd", "-dc", str(out / "root.ext4.zst")],
                                      stdout=subprocess.PIPE)
            subprocess.run(["gzip", "-1"], stdin=unzstd.stdout, stdout=dst, check=True)
            assert unzstd.wait() == 0
        part.rename(gz)
    return gz


def test_fuel_vm_sample_provisions_and_reads_back(make_vm):
    image = fuel_image()
    doc = json.loads((REPO_ROOT / "samples" / "provision-vm.json").read_text())
    vm = make_vm(disks=3, disk_size="4G", serials=["disk0", "disk1", "disk2"])
    with FileServer(image.parent) as srv:
        doc["ks_meta"]["image_data"]["/"]["uri"] = srv.guest_url(image.name)
        run = vm.provision(doc, ["--data_driver", "nailgun", "--debug"])
        assert run.returncode == 0, run.stderr[-3000:] + "\n" + run.log[-4000:]
        assert any(image.name in p for p in srv.requested)

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
