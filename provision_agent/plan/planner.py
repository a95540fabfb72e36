"""Turn a resolved layout into the ordered list of steps the executor runs.

Order: wipes → tables (one after another, so that the executor writes them at once) →
partitions → settle → wiped kept partitions → md (kept arrays assembled) → bcache →
LUKS (not on LVs) →
LVM (kept VGs only activated) → LUKS on LVs →
mkfs → block-level images → mount → tar images → fstab/crypttab/bcache check/mdadm.conf/
multipath wwids →
bootloader → configdrive → umount (a whole-disk image's own bootloader after the configdrive).
Everything a step needs is in its arguments, so the printed plan is what runs.
"""

from provision_agent import redact
from provision_agent.plan import (
    parttypes,
    planner_bcache,
    planner_boot,
    planner_crypt,
    planner_iscsi,
    planner_kept,
)
from provision_agent.plan import steps as st
from provision_agent.plan.units import human

MULTIPATH_LINKS = "/dev/disk/by-id/dm-uuid-"

CONFIGDRIVE_ID = "configdrive"
CONFIGDRIVE_BYTES = 64 << 20


def _depth(mount):
    return 0 if mount == "/" else mount.rstrip("/").count("/")


def multipath_wwids(layout, res):
    """WWIDs of the multipath disks the layout uses, in layout order."""
    found = []
    for disk in layout.disks:
        mp = res.disks.get(disk.id, {}).get("multipath")
        if isinstance(mp, dict) and mp.get("wwid"):
            found.append(mp["wwid"])
    return list(dict.fromkeys(found))


def plan(res):
    """The built-in steps, with the plug-ins' (extensions.py) at their phases' places: first,
    after partitioning, after the filesystems are made, after the image (the target mounted),
    before the initramfs and bootloader, after them (before the target is unmounted), last."""
    if not res.layout.extensions:
        return _built_in(res, lambda phase: [])
    from provision_agent.plan import extensions
    hook = lambda phase: extensions.planned(res, phase)  # noqa: E731
    return hook("first") + _built_in(res, hook) + hook("last")


def _built_in(res, hook):
    bcache_table = lambda b: planner_kept.array_table(res, b, _partition_step,  # noqa: E731
                                                      _table_text)
    steps = _tables(res) + hook("after_partitioning")
    steps += (_arrays(res) + planner_bcache.devices(res, bcache_table)
              + planner_crypt.volumes(res, on_lvs=False)
              + _lvm(res) + planner_crypt.volumes(res, on_lvs=True))
    copies = planner_boot.esp_copies(res.layout, res)
    res.warnings += planner_boot.esp_warnings(res)
    steps += _filesystems(res, copies) + hook("after_filesystems") + _block_images(res)
    mounted = _mounted(res.layout)
    steps += _mounts_and_tar_images(res, mounted) + hook("after_image") + _system_files(res)
    steps += hook("before_boot")
    steps += planner_boot.around_configdrive(res, copies, multipath_wwids(res.layout, res),
                                             _configdrive(res))
    steps += hook("after_boot")
    if mounted:
        steps.append(st.Umount([fs.mount for fs in reversed(mounted)],
                               description="unmount the target filesystems"))
    return steps


def _tables(res):
    """Every disk's wipe before any table (an old array or VG spanning two disks is gone
    before either disk gets its new table), the tables one after another (the executor writes
    them at once), the partitions, and the wait for their devices."""
    layout, dev, steps = res.layout, res.devices.get, []
    for disk in layout.disks:
        if disk.wipe:
            name = dev(disk.id)
            keep = [p.number for p in res.placed.get(disk.id, [])
                    if p.part_id and _part(layout, p.part_id).keep]
            steps.append(st.Wipe(name, keep, description=f"wipe old signatures on {name}"
                                 + (f" (keeping partitions {keep})" if keep else "")))
    # a disk that names its table gets it, empty when it lists no partitions (as curtin's
    # ptable): validation refused that on a disk something uses whole
    tabled = [d for d in layout.disks if d.partitions or d.table_named]
    for disk in tabled:
        steps.append(st.PartitionTable(dev(disk.id), disk.table,
                                       description=_table_text(layout, res, disk)))
    for disk in tabled:
        steps += [_partition_step(layout, disk, dev(disk.id), p, res.block_sizes[disk.id][0])
                  for p in res.placed.get(disk.id, [])]
    part_devices = [p.device for d in tabled for p in res.placed.get(d.id, [])
                    if p.kind != "extended"]
    if part_devices:
        steps.append(st.Settle([dev(d.id) for d in tabled], part_devices,
                               description="re-read partition tables and wait for the "
                                           "partition devices"))
    return steps + planner_kept.partition_wipes(res)


def _table_text(layout, res, disk):
    name = res.devices.get(disk.id)
    keep = [p.number for p in res.placed.get(disk.id, [])
            if p.part_id and _part(layout, p.part_id).keep]
    if not keep:
        empty = "" if res.placed.get(disk.id) else "empty "
        return f"new {empty}{disk.table} partition table on {name}"
    return (f"{disk.table} partition table on {name} edited: partitions {keep} kept where they "
            f"are, the others deleted and made anew")


def _partition_step(layout, disk, name, p, sector_size):
    part = _part(layout, p.part_id) if p.part_id else None
    return st.Partition(
        name, p.number, p.device, p.offset, p.size, sector_size,
        parttypes.type_code(disk.table, part.type if part else "extended",
                            part.type_guid if part else None),
        name=part.name if part else None,
        flags=parttypes.flags(disk.table, part.type, part.flags) if part else [],
        kind_=p.kind, guid=part.guid if part else None, keep=bool(part and part.keep),
        description=(f"keep partition {p.device} {human(p.size)} {part.type} "
                     + ("in place" if part.wipe else "as it is")
                     if part and part.keep else
                     f"partition {p.device} {human(p.size)} "
                     + (part.type if part else "extended")))


def _arrays(res):
    """Each array made or assembled, then its partitions, if it has any."""
    return [step for r in res.layout.raids
            for step in planner_kept.array(res, r)
            + planner_kept.array_table(res, r, _partition_step, _table_text)]


def _lvm(res):
    """Kept VGs only activated, new ones made with their LVs."""
    layout, dev, steps = res.layout, res.devices.get, []
    for vg in layout.volume_groups:
        lvs = vg.logical_volumes
        if vg.keep:
            # the VG and its LVs were made by an earlier provisioning: only brought up
            steps.append(st.VgActivate(
                vg.name, [dev(pv) for pv in vg.pvs], [lv.name for lv in lvs],
                [dev(lv.id) for lv in lvs],
                description=f"keep volume group {vg.name}: activate it and its logical volumes "
                f"({', '.join(lv.name for lv in lvs) or 'none listed'})"))
            continue
        for pv in vg.pvs:
            steps.append(st.PvCreate(dev(pv), description=f"LVM physical volume {dev(pv)}"))
        steps.append(st.VgCreate(vg.name, [dev(pv) for pv in vg.pvs],
                                 description=f"volume group {vg.name}"))
        # 'remaining' is taken last so that it really gets what the others leave.
        for lv in sorted(lvs, key=lambda lv: lv.size.remaining):
            size_bytes, extents = res.lv_sizes[lv.id]
            steps.append(st.LvCreate(
                vg.name, lv.name, dev(lv.id), size_bytes, extents, lv.stripes,
                description=f"logical volume {dev(lv.id)} "
                + (human(size_bytes) if size_bytes else extents)))
    return steps


def _filesystems(res, copies):
    """mkfs where the layout makes a filesystem (an image's target brings its own, a kept one
    has its own), and a vfat for each ESP copy."""
    layout, dev, steps = res.layout, res.devices.get, []
    image_targets = {im.target for im in layout.images if im.format in ("raw", "qcow2")}
    kept = layout.kept_ids()
    primary = next((fs for fs in layout.filesystems if fs.mount == "/boot/efi"), None)
    for fs in layout.filesystems:
        if fs.device in image_targets or fs.device in kept:
            continue
        # an ESP copy the layout lists: made as listed, with the primary's volume ID (below)
        same_id = dev(primary.device) if primary and fs.device in copies else None
        steps.append(st.Mkfs(dev(fs.device), fs.type, fs.label, fs.mkfs_options,
                             volume_id_of=same_id,
                             description=f"{fs.type} on {dev(fs.device)}"
                             + (f" labelled {fs.label}" if fs.label else "")
                             + (f" for a copy of the ESP with the volume ID of {same_id}"
                                if same_id else "")))
    listed = {fs.device for fs in layout.filesystems}
    for part_id in (c for c in copies if c not in listed):
        # fstab mounts /boot/efi by UUID: with the primary's volume ID on every copy, the
        # installed system still mounts an ESP (and boots) when the primary's disk is gone
        steps.append(st.Mkfs(
            dev(part_id), "vfat", primary.label if primary else None,
            primary.mkfs_options if primary else [],
            volume_id_of=dev(primary.device) if primary else None,
            description=f"vfat on {dev(part_id)} for a copy of the ESP"
            + (f" with the volume ID of {dev(primary.device)}" if primary else "")))
    return steps


def _block_images(res):
    fs_of = {fs.device: fs for fs in res.layout.filesystems}
    whole = res.layout.whole_disk_targets()
    return [_image_step(im, res.devices.get(im.target), None,
                        fs_of[im.target].type if im.target in fs_of else None,
                        whole_disk=im.format == "qcow2" and im.target in whole or None)
            for im in res.layout.images if im.format != "tar"]


def _mounted(layout):
    """The target's filesystems in mount order, kept ones too: a kept / (or /boot, /boot/efi,
    /home...) is where the image, fstab and the bootloader go, as the layout says; left
    unmounted, they went into the ramdisk's memory under the bare target directory. (A mount
    writes to the superblock, never to the data; a kept filesystem without a mount point,
    such as Ironic's ephemeral one, is not mounted.)"""
    return sorted((fs for fs in layout.filesystems if fs.mount and fs.type != "swap"),
                  key=lambda fs: (_depth(fs.mount), fs.mount))


def _mounts_and_tar_images(res, mounted):
    kept = res.layout.kept_ids()
    steps = [st.Mount(res.devices.get(fs.device), fs.mount, fs.type, fs.mount_options,
                      description=f"mount {res.devices.get(fs.device)} at {fs.mount}"
                      + (" (kept: used as it is)" if fs.device in kept else ""))
             for fs in mounted]
    steps += [_image_step(im, None, im.target, None)
              for im in sorted((im for im in res.layout.images if im.format == "tar"),
                               key=lambda im: _depth(im.target))]
    return steps


def _system_files(res):
    """fstab, mdadm.conf and multipath wwids of the installed system."""
    layout, dev, steps = res.layout, res.devices.get, []
    if layout.filesystems:
        steps.append(st.Fstab([_fstab_entry(fs, dev(fs.device), layout)
                               for fs in layout.filesystems if fs.mount or fs.type == "swap"]
                              + [_mount_entry(m) for m in layout.mounts],
                              description="write /etc/fstab by UUID"
                              + (f" with {', '.join(f'{m.type} {m.mount}' for m in layout.mounts)}"
                                 if layout.mounts else "")))
    steps += planner_crypt.crypttab(res) + planner_bcache.boot_check(res)
    if layout.raids:
        # a whole multipath disk as a member is named by its map's link, as partitions are
        maps = {dev(d.id): res.partition_bases[d.id] for d in layout.disks
                if d.id in res.disks and res.disks[d.id].get("multipath")}
        members = [maps.get(dev(m), dev(m)) for r in layout.raids for m in r.members + r.spares]
        # md must not take a path's copy of a member before multipath assembles the disk
        pinned = any(m.startswith(MULTIPATH_LINKS) for m in members)
        steps.append(st.MdadmConf([dev(r.id) for r in layout.raids],
                                  members if pinned else None,
                                  description="write mdadm.conf where the image's family "
                                              "reads it (/etc/mdadm/mdadm.conf; RHEL family: "
                                              "/etc/mdadm.conf)"
                                  + (" with DEVICE lines naming each member once"
                                     if pinned else "")))
    steps += planner_iscsi.conf_steps(layout)
    wwids = multipath_wwids(layout, res)
    if wwids and layout.filesystems:
        steps.append(st.MultipathConf(wwids, description=f"add {', '.join(wwids)} to "
                                                         "/etc/multipath/wwids"))
    return steps


def _configdrive(res):
    cd = res.layout.configdrive
    if not cd:
        return []
    step = st.Configdrive(res.devices.get(cd.partition or CONFIGDRIVE_ID), cd.format,
                          cd.content, cd.meta_data, cd.user_data, cd.network_data)
    where = step.device
    if step.device is None:
        # the disk holds a whole-disk image: its table exists only once the image is written,
        # so the partition is added then, behind the image's own
        disk_id = cd.disk or res.layout.disks[0].id
        step.append_to = res.devices.get(disk_id)
        step.size_bytes = CONFIGDRIVE_BYTES
        step.partitions_of = res.partition_bases[disk_id]
        where = f"a new {CONFIGDRIVE_BYTES >> 20}MiB partition at the end of {step.append_to}"
    step.description = f"{cd.format} configdrive on {where}"
    return [step]


def _image_step(im, device, mount_point, fs_type, whole_disk=None):
    return st.WriteImage(
        device, mount_point, im.uri, im.format, im.compression, im.checksum, im.checksum_of,
        im.allow_no_checksum, fs_type, checksum_url=im.checksum_url or None,
        checksum_algo=im.checksum_algo or None, authorization=im.authorization or None,
        signature=im.signature or None, allow_unsigned=im.allow_unsigned or None,
        whole_disk=whole_disk,
        description=f"{im.format} image {redact.url(im.uri)} to {device or mount_point}"
                    + (", its signature verified while it streams" if im.signature else ""))


def _fstab_entry(fs, device, layout):
    if fs.type == "swap":
        mount, options, default_pass = "none", "sw", 0
    else:
        mount = fs.mount
        options = planner_iscsi.netdev_options(layout, fs, fs.mount_options)
        default_pass = 1 if fs.mount == "/" else 2
    return {"device": device, "mount_point": mount, "fs_type": fs.type, "options": options,
            "dump": fs.fstab_freq,
            "pass": default_pass if fs.fstab_pass is None else fs.fstab_pass}


def _mount_entry(m):
    """A tmpfs, ramfs or bind mount's fstab line, by its spec (not a UUID); its mount point
    (and a bind's source) made as directories in the target if the image has none."""
    bind = m.type == "bind"
    return {"spec": m.source if bind else m.type, "mount_point": m.mount,
            "fs_type": "none" if bind else m.type, "options": m.options(),
            "dump": m.fstab_freq, "pass": m.fstab_pass,
            "make_dirs": [m.source, m.mount] if bind else [m.mount]}


def _part(layout, part_id):
    for _, p in layout.partitions():
        if p.id == part_id:
            return p
    raise KeyError(part_id)
