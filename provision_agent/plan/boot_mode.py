"""A native layout's bootloader against the boot mode the machine will boot in (Ironic's
answer for a node): shared by the ironic data driver and the conductor, which sends the bare
layout for --data_driver native."""


def apply(doc, boot_mode, add, where, create=True):
    """The layout's grub installs for the mode Ironic boots the node in: a layout that leaves
    it open (or says auto) gets Ironic's; one that names the other mode is refused, since the
    machine would boot in Ironic's mode into a bootloader made for the other. create: give a
    layout without a bootloader section one (grub2)."""
    bootloader = doc.setdefault("bootloader", {}) if create else doc.get("bootloader")
    if not isinstance(bootloader, dict) or bootloader.get("type", "grub2") == "none":
        return
    given = bootloader.get("boot_mode", "auto")
    if given == "auto":
        bootloader["boot_mode"] = boot_mode
        bootloader.setdefault("origin", "boot_mode")
    elif given != boot_mode:
        add(where, f"{given!r}, but Ironic boots this node in {boot_mode!r} (the instance's "
                   "or the node's capabilities boot_mode, else [deploy]default_boot_mode): "
                   "make the two agree")
