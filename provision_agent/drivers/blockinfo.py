"""Read-only facts about block devices: the holder tree, sizes, UUIDs, mounts."""

import json
import os


def tree(runner, device):
    """lsblk's tree under device (partitions, then md/dm devices built on them)."""
    return trees(runner, [device])[0]


def trees(runner, devices):
    """tree() of each of devices, in their order, from one lsblk call. lsblk names a device
    by its own path (/dev/md127 for /dev/md/boot), so a node is matched through links too."""
    res = runner.run(["lsblk", "--json", "--bytes", "-o",
                      "NAME,PATH,TYPE,FSTYPE,LABEL,MOUNTPOINT,SIZE", *devices])
    nodes = json.loads(res.stdout).get("blockdevices", [])
    out = []
    for device in devices:
        real = os.path.realpath(device)
        out.append(next((n for n in nodes if n.get("path") in (device, real)
                         or os.path.realpath(n.get("path") or "") == real),
                        {"path": device, "children": []}))
    return out


def descendants(node):
    """Every node below node, parents before children, each path once."""
    seen, out = set(), []

    def walk(n):
        for child in n.get("children") or []:
            if child["path"] not in seen:
                seen.add(child["path"])
                out.append(child)
            walk(child)

    walk(node)
    return out


def disks_under(runner, device, sys_block="/sys/class/block"):
    """The whole disks that device is built on (itself if it is one), via lsblk's inverse tree.
    A multipath map is the disk, not the paths below it: that is the device a plan names."""
    res = runner.run(["lsblk", "--json", "--inverse", "-o", "PATH,TYPE", device], check=False)
    if res.returncode != 0 or not res.stdout.strip():
        return []
    found = []

    maps = []

    def walk(node):
        # lsblk calls a bcache device (/dev/bcacheN) a disk: it stands on its backing and
        # cache devices' disks instead
        if node.get("type") == "disk" and \
                not os.path.basename(node.get("path") or "").startswith("bcache"):
            found.append(node["path"])
        elif node.get("type") == "mpath":
            maps.append(node["path"])
        for below in node.get("children") or []:
            walk(below)

    for node in json.loads(res.stdout).get("blockdevices", []):
        walk(node)
    # lsblk lists a map's paths next to it, not below it: drop the disks a map holds
    held = {os.path.basename(os.path.realpath(m)) for m in maps}
    found = [d for d in found if not held & set(holders(d, sys_block))]
    return list(dict.fromkeys(maps + found))


def holders(device, sys_block="/sys/class/block"):
    return holders_at(os.path.join(sys_block, os.path.basename(os.path.realpath(device))))


def holders_at(sys_path):
    """Kernel names of the devices built on the block device at sys_path (dm maps, md)."""
    try:
        return os.listdir(os.path.join(sys_path, "holders"))
    except OSError:
        return []


def uuid(runner, device):
    res = runner.run(["blkid", "-p", "-s", "UUID", "-o", "value", device], check=False)
    if not res.stdout.strip():
        # blkid -p bypasses the cache but some versions print nothing for swap; ask the cache
        res = runner.run(["blkid", "-s", "UUID", "-o", "value", device], check=False)
    return res.stdout.strip() or None


def fs_type(runner, device):
    """The filesystem type blkid finds on device (probing it, not its cache), or None."""
    res = runner.run(["blkid", "-p", "-s", "TYPE", "-o", "value", device], check=False)
    return res.stdout.strip() or None


def size_bytes(device):
    fd = os.open(device, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def mounts(mountinfo="/proc/self/mountinfo"):
    """[(source, mount point)] for everything mounted now, in mount order."""
    found = []
    with open(mountinfo) as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            found.append((fields[sep + 2], fields[4].replace("\\040", " ")))
    return found


def mounted_sources(mountinfo="/proc/self/mountinfo"):
    """{source device: mount point} for everything mounted now (its first mount)."""
    result = {}
    for source, where in mounts(mountinfo):
        result.setdefault(source, where)
    return result


def active_swaps(swaps="/proc/swaps"):
    with open(swaps) as f:
        return [line.split()[0] for line in f.readlines()[1:] if line.strip()]


def queue_value(device, name, sysfs="/sys/class/block"):
    """The text of the block queue attribute `name` of device (write_zeroes_max_bytes,
    discard_max_bytes, rotational, ...), or None; a partition has no queue of its own, so
    its disk's is read."""
    node = os.path.realpath(os.path.join(sysfs, os.path.basename(os.path.realpath(device))))
    for d in (node, os.path.dirname(node)):
        if os.path.isdir(os.path.join(d, "queue")):
            try:
                with open(os.path.join(d, "queue", name)) as f:
                    return f.read().strip()
            except OSError:
                return None
    return None
