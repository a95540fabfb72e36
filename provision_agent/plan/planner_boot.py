"""The bootloader's step: grub2 on the disks that boot (and the ESP copies that let each boot
alone), or a whole-disk image's own bootloader given its NVRAM entry."""

from provision_agent.plan import initramfs_policy, planner_crypt
from provision_agent.plan import steps as st
from provision_agent.plan.boot_targets import of as boot_targets_of

INITRAMFS_WORDS = {initramfs_policy.KEEP: "kept as the image has it",
                   initramfs_policy.REBUILD: "rebuilt by the image's own tool"}


def boot_targets(layout, res):
    """Disk ids to install the bootloader on: explicit, or derived (plan/boot_targets.py),
    the same list validation checked."""
    return [t for t in boot_targets_of(layout) if t in res.disks]


def esp_copies(layout, res):
    """ESP partitions on the bootloader's target disks that nothing else uses: in UEFI mode they
    get a copy of the ESP mounted at /boot/efi, so that each disk boots on its own."""
    bl = layout.bootloader
    if not bl or bl.type != "grub2" or bl.boot_mode == "bios":
        return []
    used = {fs.device for fs in layout.filesystems} | {im.target for im in layout.images}
    for r in layout.raids:
        used.update(r.members + r.spares)
    for vg in layout.volume_groups:
        used.update(vg.pvs)
    targets = set(boot_targets(layout, res))
    return [p.id for d, p in layout.partitions()
            if d.id in targets and p.type == "esp" and p.id not in used]


def around_configdrive(res, copies, wwids, configdrive):
    """The bootloader's steps and the configdrive's steps, in the order they run."""
    bl = res.layout.bootloader
    if not bl or bl.type == "none":
        return configdrive
    if bl.type == "image":
        # its entry names the ESP by partition number: the table is read once the
        # configdrive's partition, which re-reads it, is there
        return configdrive + image_steps(res)
    return grub_steps(res, copies, wwids) + configdrive


def grub_steps(res, copies, wwids):
    bl = res.layout.bootloader
    targets = [res.devices.get(t) for t in boot_targets(res.layout, res)]
    extra = [res.devices.get(p) for p in copies]
    params, why = planner_crypt.kernel_params(res.layout, bl.kernel_params)
    mode = f"{bl.boot_mode}, Secure Boot: shim + signed grub" if bl.secure_boot else bl.boot_mode
    initramfs, because, needs = initramfs_policy.choose(res.layout, wwids)
    return [st.Bootloader(bl.type, bl.boot_mode, targets, params, extra, bl.secure_boot,
                          initramfs, needs,
                          description=f"grub2 ({mode}) on "
                          f"{', '.join(targets) or 'no disk'}{why}"
                          + (f"; ESP copied to {', '.join(extra)} in UEFI mode"
                             if extra else "")
                          + f"; initramfs {INITRAMFS_WORDS[initramfs]} ({because})")]


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
