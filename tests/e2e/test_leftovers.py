"""Leftovers of earlier lives (issue 53): disks that arrive with another RAID's metadata, arrays
and volume groups already assembled, names the new layout reuses, a stale LUKS header.

One VM, seven disks, made in the ramdisk before provision runs:
  vda+vdb  an Intel IMSM container with a RAID1 volume (mdadm, IMSM_NO_PLATFORM=1), assembled
  vdc+vdd  a DDF container with a RAID1 volume, stopped: only its metadata is left
  vde+vdf  md array "legacy" (RAID1 of vde1+vdf1) and volume group "oldvg" (vde2+vdf2), active
  vdg      a partition with data to keep, a stale LUKS2 header on the next one, and
  vdg3     a stale ZFS pool's labels (uberblocks written by hand: the ramdisk has no zfs tools)
A layout that names vda-vde and vdg but not vdf, and reuses the names legacy and oldvg, is
refused with their names before anything is stopped or written; the same layout with vdf
named too clears every disk but the kept partition and is built. `tox -e e2e-hba`.
"""

import json

import pytest

pytestmark = pytest.mark.leftovers

DISKS = ["vda", "vdb", "vdc", "vdd", "vde", "vdf", "vdg"]

SETUP = r"""
set -e
export IMSM_NO_PLATFORM=1 IMSM_DEVNAME_AS_SERIAL=1
mdadm --create /dev/md/imsm0 --run --metadata=imsm --raid-devices=2 /dev/vda /dev/vdb
mdadm --create /dev/md/vol0 --run --level=1 --raid-devices=2 --size=65536 /dev/md/imsm0
mdadm --wait /dev/md/vol0 || true
mdadm --create /dev/md/ddf0 --run --metadata=ddf --raid-devices=2 /dev/vdc /dev/vdd
mdadm --create /dev/md/vol1 --run --level=1 --raid-devices=2 --size=65536 /dev/md/ddf0
# sgdisk has no -q: given one it writes nothing and still exits 0 (the first run's
# "cannot open /dev/vde1"), so its chatter goes to /dev/null instead
for d in vde vdf; do sgdisk -n1:0:+256M -t1:fd00 -n2:0:+512M -t2:8e00 /dev/$d >/dev/null; done
udevadm settle
test -b /dev/vde1 && test -b /dev/vdf2
mdadm --create /dev/md/legacy --run --level=1 --raid-devices=2 --metadata=1.2 \
      --assume-clean /dev/vde1 /dev/vdf1
mkfs.ext4 -q /dev/md/legacy
pvcreate -qq -y /dev/vde2 /dev/vdf2
vgcreate -qq oldvg /dev/vde2 /dev/vdf2
lvcreate -qq -y -n data -L 256M oldvg
mkfs.ext4 -q /dev/oldvg/data
sgdisk -n1:0:+128M -n2:0:+256M -n3:0:+256M /dev/vdg >/dev/null
udevadm settle
test -b /dev/vdg3
python3 /root/zfs_labels.py write /dev/vdg3
echo $(( $(cat /sys/class/block/vdg3/start) * 512 )) \
     $(( $(cat /sys/class/block/vdg3/size) * 512 )) > /root/zfs.place
mkfs.ext4 -q -L kept /dev/vdg1
mkdir -p /mnt/kept && mount /dev/vdg1 /mnt/kept
head -c 4M /dev/urandom > /mnt/kept/data && sha256sum /mnt/kept/data > /root/kept.sha
umount /mnt/kept
printf pw | cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
      /dev/vdg2 -
udevadm settle
# the DDF arrays stopped: a disk that arrives with metadata only
mdadm --wait /dev/md/vol1 || true
mdadm --stop /dev/md/vol1
mdadm --stop /dev/md/ddf0
"""

# ZFS's four 256 KiB vdev labels (two at the start of the device, two in the last 512 KiB
# once its size is rounded down to 256 KiB), each with its ring of 1 KiB uberblocks from
# 128 KiB on, an uberblock starting with the magic 0x00bab10c: "write DEV" puts four in each
# label, "count DEV OFFSET SIZE" prints how many are left in the labels of that byte range
# (/root/zfs_labels.py in the guest)
ZFS_LABELS = """
import os, struct, sys
what, dev = sys.argv[1:3]
fd = os.open(dev, os.O_RDWR)
start, size = (int(a) for a in sys.argv[3:5]) if what == "count" else (0, os.lseek(fd, 0, 2))
end = size - size % (256 << 10)
rings = [start + o + (128 << 10) for o in (0, 256 << 10, end - (512 << 10), end - (256 << 10))]
if what == "write":
    for ring in rings:
        for slot in range(4):
            os.pwrite(fd, struct.pack("<QQQ", 0x00BAB10C, 5000, 100 + slot), ring + slot * 1024)
    os.fsync(fd)
else:
    print(sum(struct.unpack_from("<Q", os.pread(fd, 128 << 10, ring), i)[0] == 0x00BAB10C
              for ring in rings for i in range(0, 128 << 10, 1024)))
"""


def layout(names):
    """vda+vdb: RAID1 "legacy" under VG "oldvg" with / on it (both names reused); vdc-vdf a
    filesystem each; vdg: partition 1 kept, a new filesystem where the LUKS volume was."""
    disks, filesystems = [], []
    for d in names:
        if d in ("vda", "vdb"):
            parts = [{"id": f"{d}-md", "size": "1GiB", "type": "raid"}]
        elif d == "vdg":
            parts = [{"id": "kept", "size": "128MiB", "keep": True},
                     {"id": "vdg-new", "size": "256MiB"}]
            filesystems.append({"device": "vdg-new", "type": "ext4", "label": "vdg-new"})
        else:
            parts = [{"id": f"{d}-p", "size": "remaining"}]
            filesystems.append({"device": f"{d}-p", "type": "ext4", "label": d})
        disks.append({"id": d, "match": {"name": f"/dev/{d}"}, "table": "gpt",
                      "partitions": parts})
    filesystems.append({"device": "lv-root", "type": "ext4", "mount": "/", "label": "root"})
    return {"version": 1, "disks": disks,
            "raids": [{"id": "md", "name": "legacy", "level": 1,
                       "members": ["vda-md", "vdb-md"]}],
            "volume_groups": [{"id": "vg", "name": "oldvg", "pvs": ["md"],
                               "logical_volumes": [{"id": "lv-root", "name": "root",
                                                    "size": "remaining"}]}],
            "filesystems": filesystems}


@pytest.fixture(scope="module")
def vm(make_vm_module):
    machine = make_vm_module(disks=len(DISKS), disk_size="2G")
    machine.write_text("/root/zfs_labels.py", ZFS_LABELS)
    machine.ssh(SETUP, timeout=900)
    return machine


@pytest.fixture(scope="module")
def make_vm_module(ramdisk):
    from tests.vmbench import VM
    made = []

    def factory(**kwargs):
        vm = VM(name="leftovers", ramdisk=ramdisk, **kwargs)
        made.append(vm)
        vm.__enter__()
        return vm

    yield factory
    for vm in made:
        vm.__exit__(None, None, None)


def state(vm):
    """What the leftovers look like now: arrays, groups, each disk's signature type."""
    md = vm.ssh("cat /proc/mdstat").stdout
    vgs = {v["vg_name"]: v for v in vm.vgs()}
    probes = {d: vm.ssh(f"blkid -p -o value -s TYPE /dev/{d}", check=False).stdout.strip()
              for d in DISKS}
    return md, vgs, probes


def probes_of(vm, device):
    return vm.ssh(f"blkid -p -o value -s TYPE {device}", check=False).stdout.strip()


def _uberblocks_left(vm):
    """Uberblocks in the labels of where vdg3 was (a gap in the new table)."""
    place = vm.ssh("cat /root/zfs.place").stdout.split()
    return int(vm.ssh(["python3", "/root/zfs_labels.py", "count", "/dev/vdg", *place]).stdout)


def test_leftovers_are_there_as_made(vm):
    md, vgs, probes = state(vm)
    print(md, json.dumps(probes))
    assert "imsm" in md and "legacy" in vm.ssh("ls /dev/md").stdout
    assert probes["vda"] == "isw_raid_member" and probes["vdc"] == "ddf_raid_member"
    assert "oldvg" in vgs
    assert vm.ssh("cryptsetup isLuks /dev/vdg2", check=False).returncode == 0
    assert probes_of(vm, "/dev/vdg3") == "zfs_member"
    assert _uberblocks_left(vm) == 16


def test_an_array_and_a_group_on_a_disk_the_plan_does_not_name_are_refused_by_name(vm):
    md_before, vgs_before, probes_before = state(vm)
    run = vm.provision(layout([d for d in DISKS if d != "vdf"]))
    assert run.returncode == 3, run.log
    err = run.stderr
    assert "also stands on /dev/vdf" in err and "/dev/md/legacy" in err, err
    assert "volume group oldvg on /dev/vde also stands on /dev/vdf" in err, err
    # never stopped, deactivated or wiped: everything as it was
    md, vgs, probes = state(vm)
    assert md == md_before and probes == probes_before
    assert vgs.keys() == vgs_before.keys()
    assert vm.ssh("lvs --noheadings -o lv_active oldvg/data").stdout.strip() == "active"
    assert vm.ssh("cryptsetup isLuks /dev/vdg2", check=False).returncode == 0


def test_with_every_disk_named_the_leftovers_are_cleared_and_the_layout_built(vm):
    run = vm.provision(layout(DISKS))
    assert run.returncode == 0, run.log
    md = vm.ssh("cat /proc/mdstat").stdout
    arrays = [line.split()[0] for line in md.splitlines() if line.startswith("md")]
    assert len(arrays) == 1, md                         # the new "legacy", nothing else
    members = vm.mdadm_detail("/dev/md/legacy")
    assert "/dev/vda1" in members and "/dev/vdb1" in members
    pvs = {p["pv_name"]: p["vg_name"] for p in vm.pvs()}
    legacy = vm.ssh("readlink -f /dev/md/legacy").stdout.strip()
    assert pvs == {legacy: "oldvg"}, pvs
    blkid = vm.blkid()
    for d in ("vdc", "vdd", "vde", "vdf"):
        assert blkid[f"/dev/{d}1"]["TYPE"] == "ext4" and blkid[f"/dev/{d}1"]["LABEL"] == d
    probes = {d: vm.ssh(f"blkid -p -o value -s PTTYPE /dev/{d}").stdout.strip() for d in DISKS}
    assert set(probes.values()) == {"gpt"}, probes      # no isw/ddf/md/LVM member on the disk
    for d in DISKS[:4]:
        examine = vm.ssh(f"mdadm --examine /dev/{d}", check=False)
        assert "imsm" not in examine.stdout.lower() and "ddf" not in examine.stdout.lower()
    assert blkid["/dev/vdg2"]["TYPE"] == "ext4"
    assert vm.ssh("cryptsetup isLuks /dev/vdg2", check=False).returncode != 0
    # the ZFS pool's partition is gone and so are its labels (wipefs alone left three
    # uberblocks: tests/functional/test_stale_signatures_loop.py)
    assert not vm.exists("/dev/vdg3") and _uberblocks_left(vm) == 0
    vm.ssh("mount -o ro /dev/vdg1 /mnt/kept && cd /mnt/kept && sha256sum -c /root/kept.sha"
           " && cd / && umount /mnt/kept")
