"""Clean a disk of everything that could come back: LUKS keyslots, md arrays, LVM, bcache,
filesystem signatures.

Order matters: LVs on top are deactivated before the arrays below them are stopped, arrays and
bcache devices are stopped (and cache sets unregistered) before their members' superblocks are
zeroed. Partitions listed in keep are left
untouched, and then so is the partition table itself (it is edited, not replaced, later).
"""

import logging
import os

from provision_agent.drivers import bcache, blockinfo, lvm, udev
from provision_agent.plan.devnames import partition_number

LOG = logging.getLogger(__name__)

EDGE = 1 << 20    # zeroed at each end: MBR/GPT header, GPT backup, md 1.0 superblocks
# what lsblk shows of an msdos extended partition: its EBR, which chains the logical ones
EXTENDED_STUB = 1024


def _volume_groups_on(runner, devices):
    real = {os.path.realpath(d) for d in devices}
    vgs = [pv["vg_name"] for pv in lvm.physical_volumes(runner)
           if pv.get("vg_name") and os.path.realpath(pv["pv_name"]) in real]
    return list(dict.fromkeys(vgs))


def _is_kept(node, keep):
    return node.get("type") == "part" and partition_number(node["path"]) in keep


def _take_down(runner, device, nodes):
    """Deactivate VGs and stop md arrays on device or built on top of it, top first."""
    # An active VG shows as device-mapper nodes above its PVs: without any, skip pvs, a slow
    # call made per disk (benchmarks/layouts_vs_shell.md).
    mapped = any(n["type"] in ("lvm", "dm", "crypt") for n in nodes)
    for vg in _volume_groups_on(runner, [device] + [n["path"] for n in nodes]) if mapped else ():
        LOG.info("%s: deactivating old volume group %s", device, vg)
        runner.run(["vgchange", "--activate", "n", vg], check=False)
    # An IMSM or DDF container (lsblk's type "md": it has no level) sits on the disks beside
    # the volumes in it, which mdadm must stop first: it refuses to stop a container with a
    # volume running ("member md126 still active")
    containers = [n for n in nodes if n["type"] == "md"]
    for node in [n for n in reversed(nodes) if n["type"] != "md"] + containers:
        if node["type"] in ("lvm", "dm", "crypt") and os.path.exists(node["path"]):
            # pvs does not always list a VG (e.g. one missing PVs); the mapping is what holds
            # the device, and removing it only tears down kernel state, nothing on disk
            LOG.info("%s: removing old device-mapper device %s", device, node["path"])
            runner.run(["dmsetup", "remove", "--retry", node["path"]])
        elif node["type"].startswith("raid") or node["type"] == "md":
            LOG.info("%s: stopping old array %s", device, node["path"])
            runner.run(["mdadm", "--stop", node["path"]])
        elif bcache.is_bcache(node):
            # registered by the ramdisk's udev rule; its superblock would bring it back
            bcache.stop_device(node["path"])


def _under_kept(parts, keep):
    """Paths of the kept partitions and of everything built on them."""
    paths = set()
    for part in (p for p in parts if _is_kept(p, keep)):
        paths.add(part["path"])
        paths.update(n["path"] for n in blockinfo.descendants(part))
    return paths


def crypto_erase(runner, top, nodes, spared=(), cleared=None):
    """Destroy every keyslot of each LUKS volume on top or on nodes (its partitions, arrays,
    logical volumes), while the arrays and volumes holding them are still assembled: the
    volume keys are gone for good, and with them the data. Volumes in spared are kept, and so
    is one that also stands on a disk outside cleared (the disks being cleared, top's alone by
    default): its keyslots are written on every member, and that disk is not ours."""
    cleared = set(cleared or [top["path"]])
    for node in [top] + list(nodes):
        if node.get("fstype") != "crypto_LUKS" or node["path"] in spared:
            continue
        if node.get("type") not in ("disk", "part"):
            others = set(blockinfo.disks_under(runner, node["path"])) - cleared
            if others:
                LOG.warning("%s: LUKS volume %s also stands on %s, which is not being "
                            "cleared: its keyslots are left", top["path"], node["path"],
                            ", ".join(sorted(others)))
                continue
        LOG.info("%s: destroying the keyslots of LUKS volume %s", top["path"], node["path"])
        runner.run(["cryptsetup", "erase", "--batch-mode", node["path"]], timeout=300)
        # and its headers' signatures: the wipefs of the disk below does not reach them in an
        # array's or a logical volume's data
        runner.run(["wipefs", "--all", "--force", node["path"]])


def wipe(runner, disk, keep=(), reread=True, cleared=None):
    """Clear disk; reread=False when a new partition table or a whole-disk image follows at
    once, after which the kernel re-reads the table (sgdisk --zap-all would only add its
    second of sleep: the tables it destroys are in the edges zeroed here). cleared: every
    disk this run clears (see crypto_erase)."""
    keep = set(keep)
    top = blockinfo.tree(runner, disk)
    nodes = blockinfo.descendants(top)
    # the disk's own partitions: an array on a kept member may have a table of its own, whose
    # partitions lsblk also lists below the disk (md127p1 is not the disk's partition 1)
    parts = [n for n in top.get("children") or [] if n.get("type") == "part"]
    kept = [n["path"] for n in parts if _is_kept(n, keep)]
    crypto_erase(runner, top, nodes, _under_kept(parts, keep), cleared)
    # lsblk calls a bcache device a disk; it is stacked like an array
    _take_down(runner, disk, [n for n in nodes if n.get("type") not in ("part", "disk")
                              or bcache.is_bcache(n)])
    cleared = [n for n in parts if n["path"] not in kept] + ([] if kept else [top])
    for node in cleared:
        _clear_members(runner, node["path"], node.get("fstype"))
    for node in cleared:
        # wipefs erases a ZFS label's uberblocks only until libblkid stops seeing a pool (fewer
        # than four), and never the labels' config: a pool on an old partition stayed for
        # `zpool import` to find. Its labels lie within the partition's first and last
        # 512 KiB. Not an extended partition (lsblk: 1 KiB, the EBR chain of the logicals).
        # Before the wipefs below: erasing the disk's table has the kernel re-read it and the
        # partitions' nodes go (FileNotFoundError on /dev/vda1 in the VM, 2026-11-29).
        # A partition smaller than two edges is zeroed whole: an old bios_grub (1 MiB) holds
        # the earlier install's grub core, which the disk's boot code (left when partitions
        # are kept) would still load after a power cut, and boot whatever /boot/grub/grub.cfg
        # the new image brings before this run's bootloader is there (issue 57).
        if node.get("type") == "part" and (node.get("size") or 0) > EXTENDED_STUB:
            zero_edges(node["path"])
    # one wipefs for the old partitions and then the disk itself
    if cleared:
        runner.run(["wipefs", "--all", "--force", *[n["path"] for n in cleared]])
    if kept:
        LOG.info("wipe %s: partition table and partitions %s left intact", disk, sorted(keep))
        return
    if udev.is_device_mapper(disk):
        # a multipath disk's partitions are dm maps that outlive its table: kpartx removes
        # stale ones only when it finds a new table, and until then they hold the disk
        for node in reversed(parts):
            if os.path.exists(node["path"]):
                runner.run(["dmsetup", "remove", "--retry", node["path"]])
    if reread:
        runner.run(["sgdisk", "--zap-all", disk], ok_codes=(0, 2))
    zero_edges(disk)


def clear_new(runner, devices):
    """Make devices we just created (partitions, an md array) blank.

    A new partition or array at the offsets of an old one shows the old one's contents: udev
    may already have assembled an old array from it or activated an old VG found inside it.
    Take those down, then erase every signature: one lsblk and one wipefs for all of them
    (0.2 s a call in the VM, two calls a partition before).
    """
    devices = list(devices)
    if not devices:
        return
    taken = set()       # an old array assembled from two new partitions is under both
    for device, node in zip(devices, blockinfo.trees(runner, devices)):
        above = [n for n in blockinfo.descendants(node) if n["path"] not in taken]
        taken.update(n["path"] for n in above)
        _take_down(runner, device, above)
        _clear_members(runner, device, node.get("fstype"))
    runner.run(["wipefs", "--all", "--force", *devices])


def _clear_members(runner, device, fstype):
    if fstype == "linux_raid_member":
        runner.run(["mdadm", "--zero-superblock", device], check=False)
    if fstype == "LVM2_member":
        runner.run(["pvremove", "--force", "--force", "--yes", device], check=False)
    if fstype == "bcache":
        # a cache device: its set stays registered (and would write its superblock back)
        # until stopped; a backing device's bcache device was stopped with what is on it
        bcache.stop_set(device)


def zero_edges(device, edge=EDGE):
    """Zero the first and last `edge` bytes (the GPT backup lives in the last 33 sectors)."""
    size = blockinfo.size_bytes(device)
    zeros = bytes(min(edge, size))
    fd = os.open(device, os.O_WRONLY)
    try:
        os.pwrite(fd, zeros, 0)
        os.pwrite(fd, zeros, max(0, size - len(zeros)))
        os.fsync(fd)
    finally:
        os.close(fd)


# Zeroing a whole partition or array: hours for a large one on slow disks.
ZERO_TIMEOUT = 48 * 3600


def wipe_contents(runner, device, how):
    """Give up the contents of a kept partition or array, which itself stays: whatever udev
    assembled or activated on it is taken down, LUKS keyslots destroyed, RAID and LVM labels and
    every signature cleared and its first and last MiB zeroed ("superblock"), or every byte
    of it zeroed ("zero", blkdiscard --zeroout: the kernel's write-zeroes, or plain writes)."""
    top = blockinfo.tree(runner, device)
    nodes = blockinfo.descendants(top)
    crypto_erase(runner, top, nodes, cleared=blockinfo.disks_under(runner, device))
    _take_down(runner, device, nodes)
    _clear_members(runner, device, top.get("fstype"))
    runner.run(["wipefs", "--all", "--force", device])
    if how == "zero":
        runner.run(["blkdiscard", "--zeroout", "--force", device], timeout=ZERO_TIMEOUT)
    else:
        zero_edges(device)
