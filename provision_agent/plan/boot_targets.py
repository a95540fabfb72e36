"""The disks grub is installed on: the layout's `targets`, or derived from where the boot
partitions and the boot array's members live. Validation checks the one list the planner
installs on, whoever made it (issue 56: derived ones once skipped the checks)."""


def mode_of(layout, mode=None):
    """The boot mode targets are derived for: `mode` when given (the machine's, once the
    ramdisk knows it), else the layout's (bios, uefi or auto)."""
    return mode or getattr(layout.bootloader, "boot_mode", None)


def derived(layout, mode=None):
    """{disk id: why it is a default target}, in layout order: every disk with a bios_grub or
    esp partition, and every disk holding a member of the array (or the partition) mounted at
    /boot, else at /, so that any surviving disk of a mirrored /boot boots. mode: derive them
    for this boot mode instead of the layout's (boot_mode auto: the plan carries the UEFI
    ones too, planner_boot.py)."""
    disk_ids = {d.id for d in layout.disks}
    owner = {p.id: d.id for d, p in layout.partitions()}
    why = {}
    for d in layout.disks:
        kinds = sorted({p.type for p in d.partitions if p.type in ("bios_grub", "esp")})
        if kinds:
            why[d.id] = f"it has a{'n' if kinds[0] == 'esp' else ''} {' and '.join(kinds)} " \
                        "partition"
    mounts = {fs.mount: fs.device for fs in layout.filesystems if fs.mount}
    at = "/boot" if "/boot" in mounts else "/"
    boot_dev = mounts.get(at)
    # on a partition of an array (curtin's mirrorboot-msdos-partition), its members boot it
    # in BIOS mode (grub in each MBR); under UEFI the ESPs are what boots (curtin's
    # raid-partition-to-disk: grub on disk-a's ESP, / on md partition over disks without one)
    raid_ids = {r.id for r in layout.raids}
    uefi = mode_of(layout, mode) == "uefi"
    on_part = owner.get(boot_dev) if owner.get(boot_dev) in raid_ids and not uefi else None
    held = f"whose partition {boot_dev} is mounted at {at}" if on_part else f"mounted at {at}"
    for r in layout.raids:
        if r.id in (boot_dev, on_part):
            for m in r.members:
                disk = owner.get(m, m)
                if disk in disk_ids:
                    why.setdefault(disk, f"it holds {m}, a member of {r.id}{',' if on_part else ''}"
                                         f" {held}")
    if boot_dev in owner and owner[boot_dev] in disk_ids:
        why.setdefault(owner[boot_dev], f"it holds {boot_dev}, mounted at {at}")
    return why


def of(layout, mode=None):
    """The disk ids to install the bootloader on (explicit, or derived for mode)."""
    bl = layout.bootloader
    if bl and bl.targets:
        return list(bl.targets)
    return list(derived(layout, mode))


def why(layout, mode=None):
    """{disk id: why} for derived targets; {} when the layout names its targets."""
    bl = layout.bootloader
    return {} if bl and bl.targets else derived(layout, mode)
