"""Checks of a Layout on its own (no machine needed). Every problem is reported, not the first.

Problems name the object by its origin (a JSON path, or a Fuel space/volume for that driver).
"""

from collections import Counter

from provision_agent.errors import ImageError, Problem
from provision_agent.plan import configdrive_format as configdrive
from provision_agent.plan import (
    iscsi,
    validate_bcache,
    validate_boot,
    validate_crypt,
    validate_kept,
    validate_mounts,
    validate_text,
)

MIN_MEMBERS = {0: 2, 1: 2, 4: 3, 5: 3, 6: 4, 10: 2}


def _where(obj):
    return obj.origin or getattr(obj, "id", "?")


class _Ids:
    """The layout's objects by kind of id, and how often each device is used."""

    def __init__(self, layout, add):
        self.add = add
        self.disks = {d.id: d for d in layout.disks}
        self.parts = {p.id: p for _, p in layout.partitions()}
        self.raids = {r.id: r for r in layout.raids if not r.partitions}
        self.partitioned = {x.id: "array" if x in layout.raids else "bcache device"
                            for x in layout.raids + layout.bcache if x.partitions}
        self.lvs = {lv.id: lv for _, lv in layout.logical_volumes()}
        self.whole_disks = {d.id: d for d in layout.disks if not d.partitions}
        self.crypts = {e.id: e for e in layout.encrypted}
        self.bcache = {b.id: b for b in layout.bcache if not b.partitions}
        self.block = (set(self.parts) | set(self.raids) | set(self.lvs) | set(self.whole_disks)
                      | set(self.crypts) | set(self.bcache))
        self.users = Counter()

    def use(self, ref, obj, what, allowed):
        """One more user of ref: a device may hold one array, volume group or filesystem."""
        if ref not in allowed:
            kind = "disk with partitions" if ref in self.disks else \
                f"{self.partitioned[ref]} with partitions" if ref in self.partitioned else \
                "a bcache device" if ref in self.bcache else \
                "an encrypted volume" if ref in self.crypts else "unknown id"
            self.add(obj, f"{what} {ref!r} is not a usable device here ({kind})")
            return
        self.users[ref] += 1
        if self.users[ref] == 2:
            self.add(obj, f"{ref!r} is used by more than one raid, bcache, volume group or "
                          f"filesystem")


def check(layout):
    problems = []
    add = lambda obj, msg: problems.append(Problem(_where(obj), msg))  # noqa: E731
    _check_unique_ids(layout, add)
    ids = _Ids(layout, add)
    _check_disks(layout, add)
    _check_named_tables(layout, add)
    _check_raids(layout, ids, add)
    problems += validate_bcache.check(layout, ids.use,
                                      set(ids.parts) | set(ids.raids) | set(ids.whole_disks))
    _check_volume_groups(layout, ids, add)
    for e in layout.encrypted:
        ids.use(e.device, e, "device", set(ids.parts) | set(ids.raids) | set(ids.lvs)
                | set(ids.whole_disks) | set(ids.bcache))
    problems += validate_kept.check(layout)
    problems += iscsi.check(layout)
    _check_filesystems(layout, ids.use, ids.block, add)
    validate_mounts.check(layout, add, _where)
    _check_images(layout, add, ids.block, ids.disks)
    validate_boot.check(layout, add, ids.disks)
    _check_configdrive_refs(layout, ids, add)
    _check_configdrive_disk(layout, add)
    _check_configdrive_content(layout, add)
    _check_overlaps(layout, add)
    validate_text.check(layout, add)
    problems += validate_crypt.check(layout)
    if layout.extensions:
        from provision_agent.plan import extensions  # only a document with plug-in sections
        problems += [Problem(where, msg) for where, msg in extensions.problems(layout)]
    return problems


def _check_unique_ids(layout, add):
    objects = {}
    for obj in _referencable(layout):
        if obj.id in objects:
            add(obj, f"duplicate id {obj.id!r} (also used at {_where(objects[obj.id])})")
        else:
            objects[obj.id] = obj


def _check_raids(layout, ids, add):
    for r in layout.raids:
        for ref in r.members + r.spares:
            ids.use(ref, r, "member", set(ids.parts) | set(ids.whole_disks))
        if len(r.members) < MIN_MEMBERS[r.level]:
            add(r, f"RAID{r.level} needs at least {MIN_MEMBERS[r.level]} members, "
                   f"got {len(r.members)}")
        if r.chunk_kib is not None and r.level == 1:
            add(r, "chunk does not apply to RAID1")
        if r.on_member_failure == "degrade" and r.level == 0:
            add(_Anywhere(f"{_where(r)}.on_member_failure"),
                "on_member_failure degrade needs a redundant array (RAID1, 4, 5, 6 or 10): "
                "RAID0 cannot run without a member; remove it or choose another level")
    names = Counter(r.name for r in layout.raids)
    for r in layout.raids:
        if names[r.name] > 1:
            add(r, f"duplicate raid name {r.name!r}")


def _check_volume_groups(layout, ids, add):
    vg_names = Counter(vg.name for vg in layout.volume_groups)
    for vg in layout.volume_groups:
        if vg_names[vg.name] > 1:
            add(vg, f"duplicate volume group name {vg.name!r}")
        for ref in vg.pvs:
            ids.use(ref, vg, "physical volume", set(ids.parts) | set(ids.raids)
                    | set(ids.whole_disks) | set(ids.crypts) | set(ids.bcache))
        remaining = [lv for lv in vg.logical_volumes if lv.size.remaining]
        if len(remaining) > 1:
            add(vg, f"'remaining' is used by {len(remaining)} logical volumes; at most one may")
        lv_names = Counter(lv.name for lv in vg.logical_volumes)
        for lv in vg.logical_volumes:
            if lv_names[lv.name] > 1:
                add(lv, f"duplicate logical volume name {lv.name!r} in {vg.name}")
            if lv.stripes and lv.stripes > len(vg.pvs):
                add(lv, f"{lv.stripes} stripes need as many physical volumes; "
                        f"{vg.name} has {len(vg.pvs)}")


def _check_configdrive_refs(layout, ids, add):
    cd = layout.configdrive
    if cd and cd.partition and cd.partition not in ids.parts:
        add(cd, f"partition {cd.partition!r} does not exist")
    if cd and cd.disk and cd.disk not in ids.disks:
        add(cd, f"disk {cd.disk!r} does not exist")


def _check_overlaps(layout, add):
    """Two writers of one device: the later one destroys what the earlier one made."""
    stacked = {ref: f"a member of raid {r.id!r}" for r in layout.raids
               for ref in r.members + r.spares}
    stacked.update({ref: f"a physical volume of {vg.name!r}" for vg in layout.volume_groups
                    for ref in vg.pvs})
    stacked.update({e.device: f"encrypted as {e.id!r}" for e in layout.encrypted})
    stacked.update({ref: f"a device of bcache {b.id!r}" for b in layout.bcache
                    for ref in (b.backing, b.cache) if ref})
    for im in layout.images:
        if im.format in ("raw", "qcow2") and im.target in stacked:
            add(im, f"target {im.target!r} is {stacked[im.target]}: write the image to the "
                    f"array or logical volume instead")
    cd = layout.configdrive
    if cd and cd.partition:
        taken = dict(stacked)
        taken.update({fs.device: f"the {fs.mount or fs.type} filesystem"
                      for fs in layout.filesystems})
        taken.update({im.target: "an image's target" for im in layout.images})
        if cd.partition in taken:
            add(cd, f"partition {cd.partition!r} is {taken[cd.partition]}: the configdrive "
                    f"needs a partition of its own")


def _check_configdrive_content(layout, add):
    """Ironic's configdrive string is all there before anything runs: an empty or foreign
    drive is refused now, not after the disks were written."""
    cd = layout.configdrive
    if not cd or not cd.content or cd.content.startswith(("http://", "https://")):
        return
    try:
        data = configdrive.decode_ironic(cd.content)
    except ImageError as exc:
        add(cd, str(exc))
        return
    label = configdrive.iso_label(data)
    if label != configdrive.CONFIG2_LABEL:
        found = "empty" if not data else f"an ISO labelled {label!r}" if label \
            else f"{len(data)} bytes that are not an ISO9660 image"
        add(cd, f"the configdrive is {found}: Ironic's form is a config-2 ISO9660 image, "
                f"gzip'd and base64'd (or give meta_data/user_data to have one built)")


def _check_configdrive_disk(layout, add):
    """Without a named partition the configdrive gets a new one at the end of its disk; a disk
    without partitions only has a table to add it to when a whole-disk image brings one."""
    cd = layout.configdrive
    if not cd or cd.partition or not layout.disks:
        return
    disk = next((d for d in layout.disks if d.id == cd.disk), None) if cd.disk \
        else layout.disks[0]
    if disk is None or disk.partitions:
        return
    if disk.id not in layout.whole_disk_targets():
        add(cd, f"disk {disk.id!r} has no partitions and gets no whole-disk image: there is "
                f"no partition table to add the configdrive partition to; name a partition "
                f"with 'partition' or another disk with 'disk'")


def _referencable(layout):
    yield from layout.disks
    yield from (p for _, p in layout.partitions())
    yield from layout.raids
    yield from layout.bcache
    yield from layout.volume_groups
    yield from (lv for _, lv in layout.logical_volumes())
    yield from layout.encrypted


def _check_disks(layout, add):
    for disk in layout.disks + [x for x in layout.raids + layout.bcache if x.partitions]:
        remaining = [p for p in disk.partitions if p.size.remaining]
        if len(remaining) > 1 and not validate_kept.explicit(disk.partitions):
            add(disk, f"'remaining' is used by {len(remaining)} partitions on one disk; "
                      "at most one may")
        for p in disk.partitions:
            if p.type == "custom" and not p.type_guid:
                add(p, "type 'custom' needs a type_guid")
            if p.type_guid and p.type != "custom":
                add(p, "type_guid is only for type 'custom'")
            if disk.table == "msdos" and p.type == "bios_grub":
                add(p, "a bios_grub partition only exists on gpt tables")
            if disk.table == "msdos" and (p.name or p.guid):
                add(p, "msdos tables have no partition names or GUIDs")


def _check_named_tables(layout, add):
    """A disk that names its table and lists no partitions gets an empty one: not when
    something uses the disk whole, which would write over it or be confused by it."""
    users = {im.target: "an image" for im in layout.images}
    users.update({e.device: "encryption" for e in layout.encrypted})
    users.update({pv: "a volume group" for vg in layout.volume_groups for pv in vg.pvs})
    users.update({m: "an array" for r in layout.raids for m in r.members + r.spares})
    users.update({ref: "bcache" for b in layout.bcache for ref in (b.backing, b.cache) if ref})
    users.update({fs.device: "a filesystem" for fs in layout.filesystems})
    for disk in layout.disks:
        if disk.table_named and not disk.partitions and disk.id in users:
            add(disk, f"table {disk.table!r} on a disk used whole (by {users[disk.id]}): it "
                      f"holds no partition table; leave table out, or give the disk partitions")


# Longest label each mkfs accepts.
LABEL_MAX = {"vfat": 11, "xfs": 12, "ext2": 16, "ext3": 16, "ext4": 16, "swap": 16,
             "btrfs": 255, "jfs": 16, "reiserfs": 16, "ntfs": 128}


def _check_filesystems(layout, use, block_ids, add):
    mounts = {}
    for fs in layout.filesystems:
        use(fs.device, fs, "device", block_ids)
        if fs.label and len(fs.label) > LABEL_MAX.get(fs.type, 16):
            add(fs, f"{fs.type} labels have at most {LABEL_MAX.get(fs.type, 16)} characters")
        if fs.type == "swap":
            if fs.mount:
                add(fs, "swap has no mount point")
            continue
        if fs.mount:
            if fs.mount in mounts:
                add(fs, f"mount point {fs.mount} is also used at {_where(mounts[fs.mount])}")
            mounts[fs.mount] = fs
        if fs.mount == "/boot/efi" and fs.type != "vfat":
            add(fs, "the ESP mounted at /boot/efi must be vfat")
    if "/" not in mounts and not layout.whole_disk_targets():
        add(_Anywhere("$.filesystems"), "no root filesystem: one filesystem must mount at /")


class _Anywhere:
    def __init__(self, origin):
        self.origin = origin


def _check_images(layout, add, block_ids, disks):
    mounts = {fs.mount: fs for fs in layout.filesystems if fs.mount}
    fs_devices = {fs.device: fs for fs in layout.filesystems}
    for im in layout.images:
        if im.checksum and im.checksum_url:
            add(im, "both checksum and checksum_url: give one of them")
        elif im.checksum is None and im.checksum_url is None and not im.allow_no_checksum:
            add(im, "no checksum: give checksum or checksum_url, or set allow_no_checksum to "
                    "write it unverified")
        if im.checksum_algo and not im.checksum_url:
            add(im, "checksum_algo is the algorithm of checksum_url's digest; without "
                    "checksum_url, give checksum as ALGORITHM:HEX")
        if im.format == "tar":
            if im.target not in mounts:
                add(im, f"tar images extract into a mounted filesystem; {im.target!r} is not "
                        "a mount point of this layout")
        elif im.format == "disk":
            if im.target not in disks:
                add(im, f"a whole-disk image needs a disk id as target, not {im.target!r}")
            elif disks[im.target].partitions:
                add(im, f"disk {im.target!r} gets a whole-disk image and may not also list "
                        "partitions")
        else:
            if im.target not in block_ids:
                add(im, f"target {im.target!r} is not a partition, raid, bcache or logical "
                        f"volume")
            elif im.target in fs_devices and fs_devices[im.target].type == "swap":
                add(im, f"target {im.target!r} is swap")
