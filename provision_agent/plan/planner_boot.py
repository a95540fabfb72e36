"""The bootloader's step: grub2 on the disks that boot (and the ESP copies that let each boot
alone), or a whole-disk image's own bootloader given its NVRAM entry."""

from provision_agent.plan import initramfs_policy, planner_crypt, planner_iscsi
from provision_agent.plan import steps as st
from provision_agent.plan.boot_targets import of as boot_targets_of

INITRAMFS_WORDS = {initramfs_policy.KEEP: "kept as the image has it",
                   initramfs_policy.REBUILD: "rebuilt by the image's own tool"}

# what the step does per family, once the image's /etc/os-release is there to read
# (drivers/image_family.py, drivers/bootloader_rhel.py; docs/images.md)
FAMILY_WORDS = ("Debian: grub-install, /boot/grub/grub.cfg; RHEL: grub2-install in BIOS mode, "
                "the image's shim in EFI/<vendor>/ in UEFI mode, /boot/grub2/grub.cfg, BLS "
                "entries given the command line; read from its /etc/os-release once written")


def boot_targets(layout, res, mode=None):
    """Disk ids to install the bootloader on: explicit, or derived (plan/boot_targets.py),
    the same list validation checked; mode: derived for it instead of the layout's."""
    return [t for t in boot_targets_of(layout, mode) if t in res.disks]


def esp_copies(layout, res):
    """ESP partitions on the bootloader's target disks that, in UEFI mode, get a copy of the
    ESP mounted at /boot/efi, so that each disk boots on its own: those nothing else uses, and
    those the layout lists with an unmounted vfat filesystem (curtin's mirrorboot-uefi formats
    its second ESP without mounting it)."""
    return [p.id for p, why in other_esps(layout, res) if why is None]


def other_esps(layout, res):
    """(partition, why it gets no copy, or None) of each esp partition but the one mounted
    at /boot/efi (or the members of the array that is), for grub2 in UEFI or auto mode."""
    bl = layout.bootloader
    if not bl or bl.type != "grub2" or bl.boot_mode == "bios":
        return []
    primary = next((fs.device for fs in layout.filesystems if fs.mount == "/boot/efi"), None)
    skip = {primary} | {m for r in layout.raids if r.id == primary for m in r.members + r.spares}
    uses = _uses(layout)
    fs_on = {fs.device: fs for fs in layout.filesystems}
    kept = layout.kept_ids()
    targets = set(boot_targets(layout, res, "uefi"))     # copies are made in UEFI mode only
    found = []
    for d, p in layout.partitions():
        if p.type != "esp" or p.id in skip:
            continue
        fs = fs_on.get(p.id)
        why = (f"its disk {d.id} is not a bootloader target" if d.id not in targets
               else "it is kept as it is" if p.id in kept
               else uses.get(p.id) or (None if fs is None
                                       else f"it holds {fs.type}" if fs.type != "vfat"
                                       else f"it is mounted at {fs.mount}" if fs.mount
                                       else None))
        found.append((p, why))
    return found


def _uses(layout):
    """{device id: what uses it}, besides filesystems."""
    uses = {im.target: "an image is written to it" for im in layout.images}
    uses.update({m: f"it is a member of array {r.id}" for r in layout.raids
                 for m in r.members + r.spares})
    uses.update({pv: f"it is a physical volume of {vg.id}" for vg in layout.volume_groups
                 for pv in vg.pvs})
    uses.update({e.device: f"it is encrypted as {e.id}" for e in layout.encrypted})
    uses.update({ref: f"it is a device of bcache {b.id}" for b in layout.bcache
                 for ref in (b.backing, b.cache) if ref})
    return uses


def esp_warnings(res):
    """What the plan says of each ESP that gets no copy of the boot loader."""
    return [f"{p.origin or p.id}: ESP {res.devices.get(p.id)} gets no copy of the boot "
            f"loader: {why}, so its disk does not boot from it alone"
            for p, why in other_esps(res.layout, res) if why]


def around_configdrive(res, copies, wwids, configdrive):
    """The bootloader's steps and the configdrive's steps, in the order they run."""
    bl = res.layout.bootloader
    if not bl or bl.type == "none":
        return configdrive
    if bl.type == "image":
        # its entry names the ESP by partition number: the table is read once the
        # configdrive's partition, which re-reads it, is there
        return configdrive + image_steps(res)
    # grub last: the disk boots the new system only once everything else of it is written
    # (a power cut before that leaves a disk that does not boot, never one that boots a
    # system without its configdrive; docs/reliability.md)
    return configdrive + grub_steps(res, copies, wwids)


def grub_steps(res, copies, wwids):
    bl = res.layout.bootloader
    targets = [res.devices.get(t) for t in boot_targets(res.layout, res)]
    # auto: the mode is known in the ramdisk only, and a UEFI machine boots from other disks
    uefi = [res.devices.get(t) for t in boot_targets(res.layout, res, "uefi")] \
        if bl.boot_mode == "auto" else targets
    extra = [res.devices.get(p) for p in copies]
    params, why = planner_iscsi.root_kernel_params(
        res.layout, *planner_crypt.kernel_params(res.layout, bl.kernel_params))
    mode = f"{bl.boot_mode}, Secure Boot: shim + signed grub" if bl.secure_boot else bl.boot_mode
    initramfs, because, needs = initramfs_policy.choose(res.layout, wwids)
    return [st.Bootloader(bl.type, bl.boot_mode, targets, params, extra, bl.secure_boot,
                          initramfs, needs, uefi if uefi != targets else None,
                          description=f"grub2 ({mode}) on "
                          f"{', '.join(targets) or 'no disk'}"
                          + (f" (in UEFI mode on {', '.join(uefi) or 'no disk'})"
                             if uefi != targets else "") + why
                          + (f"; ESP copied to {', '.join(extra)} in UEFI mode"
                             if extra else "")
                          + f"; initramfs {INITRAMFS_WORDS[initramfs]} ({because})"
                          + "; tools, paths and boot entries the image's family's way "
                            f"({FAMILY_WORDS})")]


def image_steps(res):
    """In UEFI (or auto) mode, the entry for each whole-disk image's loader; BIOS: nothing to
    do, the image's boot code is in its first sectors."""
    bl = res.layout.bootloader
    if bl.boot_mode == "bios":
        return []
    whole = res.layout.whole_disk_targets()
    ids = bl.targets or list(dict.fromkeys(im.target for im in res.layout.images
                                           if im.target in whole))
    disks = [res.devices.get(t) for t in ids]
    return [st.Bootloader("image", bl.boot_mode, disks, description=(
        f"the whole-disk image's own bootloader ({bl.boot_mode}): an NVRAM boot entry for the "
        f"loader on the EFI system partition of {', '.join(disks)}"))]
