"""Arrays, bcache devices and volume groups that stand on a disk the plan names and on one it
does not.

Clearing the named disk would stop the array or deactivate the group and then erase its member
there: what lives on the other disk is left degraded or incomplete, and that disk is not ours.
The run is refused, naming them; nothing is stopped, deactivated or wiped. Only reads.
"""

import os

from provision_agent.drivers import bcache, blockinfo, lvm

# md arrays (IMSM and DDF containers and their volumes too) and device-mapper devices; the
# logical volumes of a group are reported as their group, from lvm's own view
STACKED = ("raid", "md", "crypt", "dm")


def md_names(md_dir="/dev/md"):
    """{kernel device: /dev/md/NAME} of the named arrays (IMSM volumes, arrays made with
    --name): how an operator knows them."""
    try:
        entries = sorted(os.listdir(md_dir))[:4096]
    except OSError:
        return {}
    return {os.path.realpath(os.path.join(md_dir, e)): os.path.join(md_dir, e) for e in entries}


def problems(runner, trees, planned_disks):
    """[(disk, message)] for each array, device-mapper device and volume group on the disks in
    trees ({disk: blockinfo tree}) that also stands on a disk outside planned_disks."""
    found, names, with_pvs = [], None, []
    for disk, tree in trees.items():
        nodes = blockinfo.descendants(tree)
        for node in nodes:
            cached = bcache.is_bcache(node)      # lsblk calls a bcache device a disk
            if not (node.get("type", "").startswith(STACKED) or cached):
                continue
            others = set(blockinfo.disks_under(runner, node["path"])) - planned_disks
            if others:
                names = md_names() if names is None else names
                kind = "bcache device" if cached else "md array" \
                    if node["type"].startswith(("raid", "md")) else "device-mapper device"
                label = node["path"]
                if names.get(os.path.realpath(label)):
                    label += f" ({names[os.path.realpath(label)]})"
                found.append((disk, _message(kind, label, disk, others)))
        if any(n.get("fstype") == "LVM2_member" for n in [tree] + nodes):
            with_pvs.append(disk)
    return found + (_groups(runner, with_pvs, planned_disks) if with_pvs else [])


def _groups(runner, disks, planned_disks):
    """Volume groups, active or not, with a physical volume on one of disks and one on a disk
    outside planned_disks (one pvs call; lsblk's view of each physical volume's disks)."""
    groups = {}
    for pv in lvm.physical_volumes(runner):
        if pv.get("vg_name") and pv["pv_name"].startswith("/dev/"):
            groups.setdefault(pv["vg_name"], set()).update(
                blockinfo.disks_under(runner, pv["pv_name"]))
    out = []
    for vg, on in sorted(groups.items()):
        others = on - planned_disks
        for disk in (d for d in disks if d in on and others):
            out.append((disk, _message("volume group", vg, disk, others)))
    return out


def _message(kind, name, disk, others):
    return (f"{kind} {name} on {disk} also stands on {', '.join(sorted(others))}, which the "
            f"plan does not name: clearing {disk} would break it there, so nothing was "
            f"stopped or written; name those disks in the layout too, or take it apart first")
