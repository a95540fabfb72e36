"""The bench can host storage tests: md RAID1 + LVM built with the raw tools, read back inside
the VM, then checked on the disk images from outside after power-off."""

import json

from tests.vmbench import images


def test_raid1_lvm_by_hand_reads_back(make_vm):
    vm = make_vm(disks=2, disk_size="2G")
    script = """
set -e
for d in /dev/vda /dev/vdb; do
  sgdisk -Z $d >/dev/null
  sgdisk -n1:0:+64M -t1:fd00 -c1:boot -n2:0:0 -t2:fd00 -c2:pv $d >/dev/null
done
udevadm settle
mdadm --create /dev/md0 --run --level=1 --raid-devices=2 --metadata=1.0 /dev/vda1 /dev/vdb1
mdadm --create /dev/md1 --run --level=1 --raid-devices=2 --metadata=1.2 /dev/vda2 /dev/vdb2
mkfs.ext4 -q -L boot /dev/md0
pvcreate -q /dev/md1
vgcreate -q vg0 /dev/md1
lvcreate -q -y -n root -L 512M vg0
lvcreate -q -y -n data -L 256M vg0
mkfs.xfs -q -L root /dev/vg0/root
mkfs.ext4 -q -L data /dev/vg0/data
mkdir -p /mnt/root && mount /dev/vg0/root /mnt/root
head -c 8M /dev/urandom > /mnt/root/payload
sha256sum /mnt/root/payload | cut -d' ' -f1
umount /mnt/root
"""
    written = vm.ssh(script, timeout=900).stdout.split()[-1]

    mdstat = vm.mdstat()
    assert "md0 : active raid1" in mdstat and "md1 : active raid1" in mdstat
    detail = vm.mdadm_detail("/dev/md0")
    assert "Raid Level : raid1" in detail and "Version : 1.0" in detail
    lvs = {lv["lv_name"]: lv for lv in vm.lvs()}
    assert int(lvs["root"]["lv_size"]) == 512 << 20
    assert int(lvs["data"]["lv_size"]) == 256 << 20
    assert lvs["root"]["vg_name"] == "vg0"
    blkid = vm.blkid()
    assert blkid["/dev/md0"]["TYPE"] == "ext4" and blkid["/dev/md0"]["LABEL"] == "boot"
    assert blkid["/dev/mapper/vg0-root"]["TYPE"] == "xfs"
    vm.ssh("mount /dev/vg0/root /mnt/root")
    assert vm.sha256("/mnt/root/payload") == written
    vm.ssh("umount /mnt/root && vgchange -q -an vg0 && mdadm --stop /dev/md0 /dev/md1")
    vm.stop()

    # From outside: both images carry the same GPT layout and RAID members.
    for image in vm.disk_images:
        parts = images.probe_partitions(image)
        assert [p["name"] for p, _ in parts] == ["boot", "pv"]
        assert all(tags.get("TYPE") == "linux_raid_member" for _, tags in parts), json.dumps(parts)
        # metadata 1.0 sits at the end, so the filesystem is visible at the partition start too
        boot_part, _ = parts[0]
        fs = images.probe(image, boot_part["start"] * 512, boot_part["size"] * 512)
        assert fs.get("TYPE") in ("ext4", "linux_raid_member")
