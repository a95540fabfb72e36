"""A native layout's bootloader against the boot mode the machine will boot in (Ironic's
answer for a node) and whether it boots with Secure Boot on: shared by the ironic data driver
and the conductor, which sends the bare layout for --data_driver native."""


def apply(doc, boot_mode, add, where, create=True, secure_boot=False):
    """The layout's grub installs for the mode Ironic boots the node in: a layout that leaves
    it open (or says auto) gets Ironic's; one that names the other mode is refused, since the
    machine would boot in Ironic's mode into a bootloader made for the other. Likewise a node
    that Ironic boots with Secure Boot on gets the signed chain, and a layout that says
    secure_boot false is refused: its unsigned grub would not start. where: the bootloader
    section's location. create: give a layout without a bootloader section one (grub2)."""
    bootloader = doc.setdefault("bootloader", {}) if create else doc.get("bootloader")
    if not isinstance(bootloader, dict) or bootloader.get("type", "grub2") == "none":
        return
    given = bootloader.get("boot_mode", "auto")
    if given == "auto":
        bootloader["boot_mode"] = boot_mode
        bootloader.setdefault("origin", "boot_mode")
    elif given != boot_mode:
        add(f"{where}.boot_mode",
            f"{given!r}, but Ironic boots this node in {boot_mode!r} (the instance's "
            "or the node's capabilities boot_mode, else [deploy]default_boot_mode): "
            "make the two agree")
    if not secure_boot or bootloader.get("type") == "image":
        return      # a whole-disk image's own chain is signed or not as its maker made it
    if bootloader.get("secure_boot") is False:
        add(f"{where}.secure_boot",
            "false, but Ironic turns Secure Boot on for this instance (instance_info/"
            "capabilities secure_boot=true) and the firmware would refuse an unsigned grub: "
            "drop secure_boot from the layout or from the instance")
    else:
        bootloader["secure_boot"] = True
