"""The logical and physical block sizes of every block device the layout builds, from its
disks' (the inventory's), and what the tools refuse or choose from them.

- A partition has its disk's.
- An md array has the largest of its members' (the kernel stacks them so); members of
  different logical sizes are built, except under metadata 1.0, which firmware reads member
  by member as a plain filesystem written in the array's sectors, not the member's.
- A LUKS2 volume encrypts in `sector_size` bytes and shows that as its logical block size.
  Unset, it is what cryptsetup picks for the device: its physical block size, at most 4096
  and at least its logical one (512 on a 512-byte disk, 4096 on 512e and 4Kn). One smaller
  than the device's logical block size is refused: cryptsetup cannot write it.
- A bcache device has the largest logical block size of its cache set (bcache_block).
- LVM refuses physical volumes of different logical block sizes in one volume group
  (lvm.conf allow_mixed_block_sizes is off by default): such a group is refused here.
  Logical volumes have their group's sizes.
- Legacy BIOS reads its boot disk in 512-byte sectors: SeaBIOS does not take a virtio or SCSI
  disk of 4096-byte sectors as a boot disk at all, and server firmware supports 4Kn boot disks
  in UEFI mode only. BIOS boot from a disk of larger logical sectors is refused.
"""

from provision_agent.errors import Problem

LUKS_MAX_SECTOR = 4096


def propagate(layout, res):
    """Fill res.blocks (block id -> (logical, physical)) and res.luks_sector_sizes; return the
    problems. Blocks on a disk that did not resolve are left out (already reported)."""
    problems, sizes = [], res.blocks
    for disk in layout.disks:
        if disk.id in res.block_sizes:
            sizes[disk.id] = res.block_sizes[disk.id][:2]
            for p in disk.partitions:
                sizes[p.id] = sizes[disk.id]
    for r in layout.raids:
        members = [(m, sizes[m]) for m in r.members + r.spares if m in sizes]
        if len(members) != len(r.members + r.spares):
            continue
        logicals = sorted({s[0] for _, s in members})
        if len(logicals) > 1 and r.metadata == "1.0":
            problems.append(Problem(r.origin or r.id, f"members of {_mixed(members, res)}: "
                                    f"metadata 1.0 is read member by member as a plain "
                                    f"filesystem, written in the array's {logicals[-1]}-byte "
                                    f"sectors; put the array on disks of one sector size"))
        sizes[r.id] = (logicals[-1], max(s[1] for _, s in members))
        for p in r.partitions:
            sizes[p.id] = sizes[r.id]
    _bcache(layout, sizes)
    lvs = {lv.id for _, lv in layout.logical_volumes()}
    problems += _luks([e for e in layout.encrypted if e.device not in lvs], res)
    for vg in layout.volume_groups:
        pvs = [(pv, sizes[pv]) for pv in vg.pvs if pv in sizes]
        if len(pvs) != len(vg.pvs):
            continue
        logicals = sorted({s[0] for _, s in pvs})
        if len(logicals) > 1:
            problems.append(Problem(vg.origin or vg.id, f"physical volumes of {_mixed(pvs, res)}"
                                    f": LVM refuses one volume group over different logical "
                                    f"block sizes (lvm.conf allow_mixed_block_sizes); put "
                                    f"{vg.name} on disks of one sector size"))
        sizes[vg.id] = (logicals[-1], max(s[1] for _, s in pvs))
        for lv in vg.logical_volumes:
            sizes[lv.id] = sizes[vg.id]
    problems += _luks([e for e in layout.encrypted if e.device in lvs], res)
    return problems + _bios_boot(layout, res)


def _bios_boot(layout, res):
    bl = layout.bootloader
    if not bl or bl.boot_mode != "bios" or bl.type == "none":
        return []
    from provision_agent.plan import planner_boot
    targets = (bl.targets or sorted(layout.whole_disk_targets())) if bl.type == "image" \
        else planner_boot.boot_targets(layout, res)
    return [Problem(bl.origin or "bootloader", (
        f"BIOS boot from {res.devices.get(t, t)}, a disk of {res.blocks[t][0]}-byte logical "
        f"sectors (4Kn): legacy BIOS reads its boot disk in 512-byte sectors and does not boot "
        f"a 4Kn disk (server firmware supports 4Kn boot disks in UEFI mode only); boot the "
        f"machine in UEFI mode (bootloader boot_mode 'uefi' and an esp partition) or put the "
        f"bootloader on a disk of 512-byte logical sectors"))
        for t in targets if t in res.blocks and res.blocks[t][0] > 512]


def bcache_block(layout, sizes, b):
    """The block size a bcache device is made with: the largest logical block of its cache set
    (its cache and every backing device that cache serves), since the kernel attaches no
    backing device of smaller blocks than its set's. None when a disk did not resolve."""
    refs = [b.backing] if b.cache is None else [b.cache] + [
        o.backing for o in layout.bcache if o.cache == b.cache]
    if any(ref not in sizes for ref in refs):
        return None
    return max(sizes[ref][0] for ref in refs)


def _bcache(layout, sizes):
    for b in layout.bcache:
        block = bcache_block(layout, sizes, b)
        if block is not None:
            sizes[b.id] = (block, max(sizes[b.backing][1], block))
            sizes.update({p.id: sizes[b.id] for p in b.partitions})


def luks_default(logical, physical):
    """The encryption sector size cryptsetup picks for a device of these block sizes."""
    return max(logical, min(physical, LUKS_MAX_SECTOR))


def _luks(volumes, res):
    problems = []
    for e in volumes:
        if e.device not in res.blocks:
            continue
        logical, physical = res.blocks[e.device]
        sector = e.sector_size or luks_default(logical, physical)
        if sector < logical:
            problems.append(Problem(e.origin or e.id, f"sector_size {sector} is smaller than "
                                    f"the {logical}-byte logical blocks of "
                                    f"{res.devices.get(e.device, e.device)}: cryptsetup cannot "
                                    f"encrypt in sectors smaller than the device's; use "
                                    f"{logical} or leave it out"))
        res.luks_sector_sizes[e.id] = sector
        res.blocks[e.id] = (max(sector, logical), max(sector, physical))
    return problems


def _mixed(members, res):
    return "different logical block sizes (" + ", ".join(
        f"{res.devices.get(m, m)}: {s[0]}" for m, s in members) + ")"
