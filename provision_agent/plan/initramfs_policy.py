"""Whether the bootloader step rebuilds the installed system's initramfs.

Rebuilding runs the image's update-initramfs or dracut in the target: minutes under
emulation, tens of seconds on real machines, the longest part of a partition image's deploy.
It is needed when the initramfs must know something this run made that it cannot find by
itself: LUKS (crypttab, clevis), multipath (the WWIDs), a / on bcache (bcache-tools' hook,
which a kept initramfs may lack), or a filesystem the image did not
bring (a tar image unpacked into a filesystem of the layout's choosing, whose driver the
image's initramfs may lack). When the root is the image's own filesystem written as it is,
the image's initramfs boots it by the UUID on the kernel command line: on a plain device as
it is, and on md RAID or LVM when it carries mdadm or lvm, which assemble and activate what
they find (the bootloader step lists the initramfs to check: `needs`). ironic-python-agent
never rebuilds, on software RAID either. `bootloader.initramfs: "rebuild"` asks for the
rebuild anyway (an image whose initramfs was built for another machine's drivers).
"""

from provision_agent.plan import iscsi, validate_bcache

KEEP = "keep"
REBUILD = "rebuild"
# formats that write a filesystem image as it is onto the target device
FILESYSTEM_IMAGES = ("raw", "qcow2")


def choose(layout, multipath_wwids):
    """(KEEP or REBUILD, why, needs): the why says what made the choice, for the plan; needs,
    the tools a kept initramfs must carry (else the bootloader step rebuilds it)."""
    bl = layout.bootloader
    if bl is not None and getattr(bl, "initramfs", "auto") == REBUILD:
        return REBUILD, "asked for (bootloader.initramfs)", []
    root = next((fs for fs in layout.filesystems if fs.mount == "/"), None)
    # a bcache device elsewhere is registered by the installed root's own udev rule
    cached = root is not None and validate_bcache.on_bcache(layout, root.device)
    stacked = [what for what, present in (
        ("encryption", layout.encrypted), ("multipath", multipath_wwids),
        ("/ on iSCSI", iscsi.root_target(layout)),
        ("/ on bcache", cached)) if present]
    if stacked:
        return REBUILD, f"the layout has {' and '.join(stacked)}", []
    if root is None:
        return REBUILD, "no filesystem is mounted at /", []
    if not any(im.target == root.device and im.format in FILESYSTEM_IMAGES
               for im in layout.images):
        return REBUILD, "/ is not a filesystem image written as it is", []
    needs = [tool for tool, present in (("mdadm", layout.raids), ("lvm", layout.volume_groups))
             if present]
    if needs:
        return KEEP, (f"/ is the image's own filesystem; kept if the image's initramfs carries "
                      f"{' and '.join(needs)}, else rebuilt"), needs
    return KEEP, "/ is the image's own filesystem on a plain device", []
