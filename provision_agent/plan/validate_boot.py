"""Checks of the layout's bootloader: grub's needs (a boot partition on each target, the ESP
mounted), and a whole-disk image's own bootloader (`type` image) on what it writes."""

from provision_agent.plan import boot_targets


def check(layout, add, disks):
    bl = layout.bootloader
    if bl and bl.secure_boot and (bl.type != "grub2" or bl.boot_mode == "bios"):
        add(bl, "secure_boot needs a grub2 bootloader booting in uefi (or auto) mode: "
                "firmware checks signatures only when it boots in UEFI mode")
    if not bl or bl.type == "none":
        return
    if bl.type == "image":
        _check_image_type(layout, add, bl, disks)
        return
    if not layout.images:
        add(bl, "grub is installed into the system an image brings, and no image is given: "
                "add one to images, or set bootloader type 'none' for a layout without an OS")
    because = boot_targets.why(layout)
    for t in boot_targets.of(layout):
        _check_grub_target(add, bl, disks.get(t), t,
                           f" (a default target: {because[t]}; give it the partition, or name "
                           "the disks that boot in targets)" if t in because else "")
    if bl.boot_mode == "uefi":
        if not any(fs.mount == "/boot/efi" for fs in layout.filesystems):
            add(bl, "UEFI boot needs a vfat filesystem mounted at /boot/efi")


def _check_grub_target(add, bl, disk, t, why):
    """The one check of a disk grub goes on, named in `targets` or derived (why says so)."""
    if disk is None:
        add(bl, f"bootloader target {t!r} is not a disk id")
        return
    types = {p.type for p in disk.partitions}
    if bl.boot_mode == "bios" and disk.table == "gpt" and "bios_grub" not in types:
        add(bl, f"BIOS boot from gpt disk {t!r} needs a bios_grub partition on it{why}")
    if bl.boot_mode == "uefi" and "esp" not in types:
        add(bl, f"UEFI boot from disk {t!r} needs an esp partition on it (type esp: GPT type "
                f"EF00, MBR type 0xef){why}")


def _check_image_type(layout, add, bl, disks):
    whole = layout.whole_disk_targets()
    if not whole:
        add(bl, "type 'image' is the bootloader a whole-disk image brings, and no image is "
                "written to a whole disk: use grub2 for a filesystem image, none for no OS")
    for t in bl.targets or []:
        if t not in whole:
            add(bl, f"bootloader target {t!r} gets no whole-disk image "
                    f"({'a disk with partitions' if t in disks else 'not a disk id'})")
    if bl.kernel_params:
        add(bl, "kernel_params cannot be set for type 'image': the image's own bootloader "
                "keeps its own command line")
