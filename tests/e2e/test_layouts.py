"""Every storage layout the product promises, provisioned by /usr/bin/provision in the ramdisk
and read back: inside the VM (lsblk, mdadm, lvm, fstab) and from the disk images outside.

One VM serves the module, so each test also provisions over whatever the previous one left
(active arrays, volume groups): re-provisioning is exercised on every test.
"""

import json
import re
import time

import pytest

from tests.vmbench import VM, images
from tests.vmbench.ramdisk import REPO_ROOT

SAMPLES = REPO_ROOT / "samples"
GPT = {"bios_grub": "21686148-6449-6E6F-744E-656564454649",
       "swap": "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F",
       "linux": "0FC63DAF-8483-4772-8E79-3D69D8477DE4",
       "raid": "A19D880F-05FC-4D3B-A006-743F0F84911E",
       "lvm": "E6D6D379-F507-44C2-A23C-238F2A3DF928"}
TIMES = {}


@pytest.fixture(scope="module")
def vm(ramdisk):
    with VM(disks=3, disk_size="4G", serials=["disk0", "disk1", "disk2"], name="layouts",
            ramdisk=ramdisk) as machine:
        yield machine
    if TIMES:
        print("\nprovision seconds per layout: " + json.dumps(TIMES))


def provision(vm, doc, *args, expect=0):
    name = doc.stem if hasattr(doc, "stem") else "inline"
    start = time.monotonic()
    run = vm.provision(doc, ["--debug", *args])
    TIMES[name] = round(time.monotonic() - start, 1)
    assert run.returncode == expect, (
        f"provision exited {run.returncode}, expected {expect}\n{run.stderr[-3000:]}\n"
        f"--- log tail\n{chr(10).join(run.log.splitlines()[-40:])}")
    return run


def children(vm, disk):
    tree = {d["name"]: d for d in vm.lsblk()}
    return {c["path"]: c for c in tree[disk].get("children") or []}


def fstab_of(vm, root_device, extra=""):
    vm.ssh(f"mkdir -p /mnt/check && mount {root_device} /mnt/check")
    try:
        fstab = vm.read_text("/mnt/check/etc/fstab")
        more = vm.read_text(f"/mnt/check/{extra}") if extra else ""
    finally:
        vm.ssh("umount /mnt/check")
    rows = [line.split() for line in fstab.splitlines() if line and not line.startswith("#")]
    return rows, more


def edges_sha(vm, disk):
    """sha256 of the first and last 4 MiB: where tables, superblocks and signatures live."""
    return vm.ssh(f"(dd if={disk} bs=1M count=4 status=none; "
                  f"dd if={disk} bs=1M skip=$(( $(blockdev --getsize64 {disk}) / 1048576 - 4 ))"
                  f" status=none) | sha256sum").stdout.split()[0]


def test_single_disk_gpt_bios_grub_root_swap(vm):
    # marks on the disks the layout does not name, to prove they are not touched
    for disk in ("/dev/vdb", "/dev/vdc"):
        vm.ssh(f"head -c 4M /dev/urandom > {disk}; sync")
    before = {d: edges_sha(vm, d) for d in ("/dev/vdb", "/dev/vdc")}

    provision(vm, SAMPLES / "single-disk.json")

    parts = children(vm, "vda")
    assert [p["parttype"].upper() for p in parts.values()] == [
        GPT["bios_grub"], GPT["swap"], GPT["linux"]]
    assert parts["/dev/vda2"]["fstype"] == "swap"
    assert (parts["/dev/vda3"]["fstype"], parts["/dev/vda3"]["label"],
            parts["/dev/vda3"]["partlabel"]) == ("ext4", "root", "root")
    rows, _ = fstab_of(vm, "/dev/vda3")
    assert rows == [[f"UUID={parts['/dev/vda3']['uuid']}", "/", "ext4", "defaults", "0", "1"],
                    [f"UUID={parts['/dev/vda2']['uuid']}", "none", "swap", "sw", "0", "0"]]
    assert {d: edges_sha(vm, d) for d in before} == before

    # from outside: the image file carries the same table
    vm.ssh("sync")
    table = images.partition_table(vm.disk_images[0])
    assert table["label"] == "gpt"
    assert [(p["type"], p["size"] * 512) for p in table["partitions"][:2]] == [
        (GPT["bios_grub"], 1 << 20), (GPT["swap"], 256 << 20)]


def test_two_disks_raid1_boot_and_lvm_on_raid1(vm):
    provision(vm, SAMPLES / "two-disk-raid-lvm.json")

    boot = vm.mdadm_detail("/dev/md/boot")
    assert "Raid Level : raid1" in boot and "Version : 1.0" in boot
    assert "Raid Devices : 2" in boot
    os_md = vm.mdadm_detail("/dev/md/os")
    assert "Raid Level : raid1" in os_md and "Version : 1.2" in os_md
    lvs = {lv["lv_name"]: lv for lv in vm.lvs() if lv["vg_name"] == "os"}
    assert int(lvs["root"]["lv_size"]) == 1536 << 20
    assert int(lvs["swap"]["lv_size"]) == 256 << 20
    assert int(lvs["data"]["lv_size"]) > 1 << 30
    blkid = vm.blkid()
    assert blkid["/dev/mapper/os-data"]["TYPE"] == "xfs"
    assert blkid["/dev/mapper/os-root"]["TYPE"] == "ext4"
    boot_dev = vm.ssh("readlink -f /dev/md/boot").stdout.strip()
    assert blkid[boot_dev]["TYPE"] == "ext2" and blkid[boot_dev]["LABEL"] == "boot"

    rows, mdadm_conf = fstab_of(vm, "/dev/os/root", "etc/mdadm/mdadm.conf")
    by_mount = {r[1]: r for r in rows}
    assert set(by_mount) == {"/", "/boot", "none", "/srv/data"}
    assert by_mount["/srv/data"][2:] == ["xfs", "defaults,noatime", "0", "2"]
    assert by_mount["/boot"][0] == f"UUID={blkid[boot_dev]['UUID']}"
    arrays = [line for line in mdadm_conf.splitlines() if line.startswith("ARRAY")]
    assert len(arrays) == 2 and any("/dev/md/boot" in a for a in arrays), mdadm_conf


def test_three_disks_raid5_raid0_and_striped_lvm(vm):
    provision(vm, SAMPLES / "three-disk-raid5-raid0-striped.json")

    data = vm.mdadm_detail("/dev/md/data")
    assert "Raid Level : raid5" in data and "Chunk Size : 128K" in data
    assert "Raid Devices : 3" in data
    scratch = vm.mdadm_detail("/dev/md/scratch")
    assert "Raid Level : raid0" in scratch and "Chunk Size : 64K" in scratch
    lvs = {lv["lv_name"]: lv for lv in vm.lvs() if lv["vg_name"] == "os"}
    assert lvs["root"]["segtype"] == "striped"
    assert len(lvs["root"]["devices"].split(",")) == 3, lvs["root"]
    assert int(lvs["root"]["lv_size"]) == 3 << 30
    blkid = vm.blkid()
    assert blkid["/dev/mapper/os-var"]["TYPE"] == "btrfs"
    md_data = vm.ssh("readlink -f /dev/md/data").stdout.strip()
    assert blkid[md_data]["TYPE"] == "xfs"
    # the two-disk layout's arrays and VG from the previous test are gone
    assert "/dev/md/boot" not in vm.ssh("ls /dev/md").stdout.split()


def take_apart_beside(vm, *disks):
    """What an operator does before a layout that names one disk where the earlier tests'
    arrays and volume groups also stand on others: provision refuses to break them there
    (machine/spanning.py), so they are stopped and the other disks cleared by hand."""
    parts = " ".join(f"{d}?*" for d in disks)
    vm.ssh(f"vgchange -an >/dev/null 2>&1; mdadm --stop --scan >/dev/null 2>&1; "
           f"for p in {parts}; do [ -b $p ] && wipefs -a -f $p >/dev/null; done; "
           f"wipefs -a -f {' '.join(disks)} >/dev/null; partprobe {' '.join(disks)}; "
           f"udevadm settle")


def test_msdos_primary_extended_logical(vm):
    take_apart_beside(vm, "/dev/vdb", "/dev/vdc")
    provision(vm, SAMPLES / "msdos-logical.json")

    table = json.loads(vm.ssh("sfdisk --json /dev/vda").stdout)["partitiontable"]
    assert table["label"] == "dos"
    parts = {p["node"]: p for p in table["partitions"]}
    assert sorted(parts) == [f"/dev/vda{n}" for n in range(1, 8)]
    assert [parts[f"/dev/vda{n}"]["type"] for n in range(1, 8)] == [
        "83", "83", "82", "f", "83", "83", "8e"]
    assert parts["/dev/vda1"].get("bootable") is True
    blkid = vm.blkid()
    assert blkid["/dev/vda5"]["TYPE"] == "xfs" and blkid["/dev/vda6"]["TYPE"] == "ext3"
    rows, _ = fstab_of(vm, "/dev/vda2")
    assert {r[1]: r[3:] for r in rows}["/tmp"] == ["nodev,nosuid", "0", "0"]


KEEP_LAYOUT = {
    "version": 1,
    "disks": [{"id": "d0", "match": {"serial": "disk0"}, "partitions": [
        {"id": "bios", "size": "1MiB", "type": "bios_grub"},
        {"id": "root", "size": "1GiB"},
        {"id": "data", "size": "remaining", "name": "data"}]}],
    "filesystems": [{"device": "root", "type": "ext4", "mount": "/"},
                    {"device": "data", "type": "ext4", "mount": "/srv", "label": "data"}]}


def test_missing_or_small_disk_exits_3_before_any_write(vm):
    before = {d: edges_sha(vm, d) for d in ("/dev/vda", "/dev/vdb")}
    missing = json.loads(json.dumps(KEEP_LAYOUT))
    missing["disks"].append({"id": "d9", "match": {"serial": "nope"}, "partitions": [
        {"id": "x", "size": "1GiB"}]})
    run = provision(vm, missing, expect=3)
    assert "d9" in run.stderr or "disks[1]" in run.stderr
    small = json.loads(json.dumps(KEEP_LAYOUT))
    small["disks"][0]["partitions"][1]["size"] = "8GiB"
    provision(vm, small, expect=3)
    assert {d: edges_sha(vm, d) for d in before} == before


def test_disk_in_use_exits_3_and_is_left_alone(vm):
    provision(vm, KEEP_LAYOUT)
    vm.ssh("mkdir -p /mnt/busy && mount /dev/vda3 /mnt/busy")
    try:
        before = edges_sha(vm, "/dev/vda")
        run = provision(vm, KEEP_LAYOUT, expect=3)
        assert "/dev/vda3 is mounted at /mnt/busy" in run.stderr
        assert edges_sha(vm, "/dev/vda") == before
    finally:
        vm.ssh("umount /mnt/busy")


def clear_third_disk(vm):
    """The two-disk layouts leave /dev/vdc alone; clear what earlier tests left on it (a VG
    'os' with a PV there would, rightly, stop them at preflight)."""
    vm.ssh("vgchange -an >/dev/null 2>&1; wipefs -a -f /dev/vdc?* >/dev/null 2>&1; "
           "sgdisk -Z /dev/vdc >/dev/null; partprobe /dev/vdc; udevadm settle", check=False)


def test_vg_name_taken_on_an_unplanned_disk_exits_3_before_any_write(vm):
    # what the three-disk test leaves behind when a two-disk layout follows: its VG keeps a PV
    # on the third disk, which the new plan must not touch, so the name can never be freed
    clear_third_disk(vm)
    vm.ssh("sgdisk -n1:0:+64M -t1:8e00 /dev/vdc >/dev/null && partprobe /dev/vdc && "
           "udevadm settle && pvcreate -ff -y /dev/vdc1 && vgcreate clash /dev/vdc1")
    try:
        doc = json.loads((SAMPLES / "two-disk-raid-lvm.json").read_text())
        doc["volume_groups"][0]["name"] = "clash"
        before = {d: edges_sha(vm, d) for d in ("/dev/vda", "/dev/vdb", "/dev/vdc")}
        run = provision(vm, doc, expect=3)
        assert ("volume group clash: the name is taken by an existing volume group with "
                "physical volume /dev/vdc1 on /dev/vdc") in run.stderr, run.stderr
        assert {d: edges_sha(vm, d) for d in before} == before
    finally:
        vm.ssh("vgremove -ff -y clash", check=False)
        clear_third_disk(vm)


_KILL_ON_MOUNT = """
import os, signal, sys, time
pid = int(open("/tmp/kill.pid").read())
deadline = time.monotonic() + 300
while " /tmp/provision-target " not in open("/proc/mounts").read():
    if time.monotonic() > deadline:
        sys.exit("provision never mounted its target")
    time.sleep(0.01)
os.kill(pid, signal.SIGKILL)
time.sleep(1)
"""


def test_killed_midway_then_rerun_succeeds(vm):
    clear_third_disk(vm)
    doc = SAMPLES / "two-disk-raid-lvm.json"
    vm.write_text("/tmp/kill.json", doc.read_text())
    # in its own process (PROVISION_WARM=off): through the warm server, the command killed
    # stops its run with SIGTERM, which unwinds; this is the run that gets no cleanup at all
    vm.ssh("rm -f /tmp/kill.log; PROVISION_WARM=off setsid provision --input_data_file "
           "/tmp/kill.json --log_file /tmp/kill.log >/dev/null 2>&1 < /dev/null & "
           "echo $! > /tmp/kill.pid")
    # kill -9 (no cleanup at all) once the arrays exist and a filesystem is mounted. A shell loop
    # with `sleep 0.2` let the run go on for a few more steps (CI once saw it reach fstab), so the
    # watcher polls every 10 ms and kills from the same process that saw the mount.
    waited = vm.ssh("python3 -c '" + _KILL_ON_MOUNT + "'", timeout=400, check=False)
    mounts = vm.ssh("cat /proc/mounts").stdout
    assert waited.returncode == 0 and "/tmp/provision-target" in mounts, (
        f"watcher exited {waited.returncode}: {waited.stdout}{waited.stderr}\nstill running:\n"
        + vm.ssh("ps -eo pid,etimes,args | grep -v ' \\[' ", check=False).stdout
        + "\n--- kill.log tail\n" + vm.read_text("/tmp/kill.log")[-6000:])
    steps = [re.search(r"step (\d+)/(\d+): (.*)", line).groups()
             for line in vm.read_text("/tmp/kill.log").splitlines()
             if "provision_agent.run.executor: step" in line]
    first_mount = min(int(n) for n, _, what in steps if what.startswith("mount "))
    last, total = int(steps[-1][0]), int(steps[-1][1])
    # killed with the target mounted: after the first mount began, before the final unmount
    assert first_mount <= last < total, steps[-3:]
    provision(vm, doc)
    assert "Raid Level : raid1" in vm.mdadm_detail("/dev/md/os")
    rows, _ = fstab_of(vm, "/dev/os/root")
    assert len(rows) == 4
