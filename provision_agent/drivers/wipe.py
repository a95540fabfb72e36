"""Clean a disk of everything that could come back: md arrays, LVM, filesystem signatures.

Order matters: LVs on top are deactivated before the arrays below them are stopped, arrays are
stopped before their members' superblocks are zeroed. Partitions listed in keep are left
untouched, and then so is the partition table itself (it is edited, not replaced, later).
"""

import logging
import os

from provision_agent.drivers import blockinfo, lvm, udev
from provision_agent.devnames import partition_number

LOG = logging.getLogger(__name__)

EDGE = 1 << 20    # zeroed at each end: MBR/GPT header, GPT backup, md 1.0 superblocks


def _volume_groups_on(runner, devices):
    real = {os.path.realpath(d) for d in devices}
    vgs = [pv["vg_name"] for pv in lvm.physical_volumes(runner)
           if pv.get("vg_name") and os.path.realpath(pv["pv_name"]) in real]
    return list(dict.fromkeys(vgs))


def _is_kept(node, keep):
    return node.get("type") == "part" and partition_number(node["path"]) in keep


def _take_down(runner, device, nodes):
    """Deactivate VGs and stop md arrays on device or built on top of it, top first."""
    # An active VG holds its PVs only through its LVs' device-mapper nodes, which lsblk lists
    # above them; with none there, pvs (0.2 s in the VM, once per disk and per new device:
    # 10-36 calls a layout) has nothing to find that vgchange could take down.
    mapped = any(n["type"] in ("lvm", "dm", "crypt") for n in nodes)
    for vg in _volume_groups_on(runner, [device] + [n["path"] for n in nodes]) if mapped else ():
        LOG.info("%s: deactivating old volume group %s", device, vg)
        runner.run(["vgchange", "--activate", "n", vg], check=False)
    for node in reversed(nodes):
        if node["type"] in ("lvm", "dm", "crypt") and os.path.exists(node["path"]):
            # pvs does not always list a VG (e.g. one missing PVs); the mapping is what holds
            # the device, and removing it only tears down kernel state, nothing on disk
            LOG.info("%s: removing old device-mapper device %s", device, node["path"])
            runner.run(["dmsetup", "remove", "--retry", node["path"]])
        elif node["type"].startswith("raid") or node["type"] == "md":
            LOG.info("%s: stopping old array %s", device, node["path"])
            runner.run(["mdadm", "--stop", node["path"]])


def wipe(runner, disk, keep=()):
    keep = set(keep)
    top = blockinfo.tree(runner, disk)
    nodes = blockinfo.descendants(top)
    parts = [n for n in nodes if n.get("type") == "part"]
    kept = [n["path"] for n in parts if _is_kept(n, keep)]
    _take_down(runner, disk, [n for n in nodes if n.get("type") not in ("part", "disk")])
    for node in parts:
        if node["path"] in kept:
            continue
        _clear_signatures(runner, node["path"], node.get("fstype"))
    if kept:
        LOG.info("wipe %s: partition table and partitions %s left intact", disk, sorted(keep))
        return
    _clear_signatures(runner, disk, top.get("fstype"))
    if udev.is_device_mapper(disk):
        # a multipath disk's partitions are dm maps that outlive its table: kpartx removes
        # stale ones only when it finds a new table, and until then they hold the disk
        for node in reversed(parts):
            if os.path.exists(node["path"]):
                runner.run(["dmsetup", "remove", "--retry", node["path"]])
    runner.run(["sgdisk", "--zap-all", disk], ok_codes=(0, 2))
    zero_edges(disk)


def clear_new(runner, device):
    """Make a device we just created (partition, md array) blank.

    A new partition or array at the offsets of an old one shows the old one's contents: udev
    may already have assembled an old array from it or activated an old VG found inside it.
    Take those down, then erase every signature.
    """
    node = blockinfo.tree(runner, device)
    _take_down(runner, device, blockinfo.descendants(node))
    _clear_signatures(runner, device, node.get("fstype"))


def _clear_signatures(runner, device, fstype):
    if fstype == "linux_raid_member":
        runner.run(["mdadm", "--zero-superblock", device], check=False)
    if fstype == "LVM2_member":
        runner.run(["pvremove", "--force", "--force", "--yes", device], check=False)
    runner.run(["wipefs", "--all", "--force", device])


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
