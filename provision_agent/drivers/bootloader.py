"""grub2 for BIOS (i386-pc on every target disk) and UEFI (x86_64-efi, removable path too).

UEFI installs into the one ESP mounted at /boot/efi (plus the removable EFI/BOOT/BOOTX64.EFI
path, so firmware without an NVRAM entry still boots); ESPs on further disks are not synced yet
and RAID1 (metadata 1.0) ESPs are not supported. The image's grub is used when it has one,
else the ramdisk's with --boot-directory/--efi-directory pointing into the target.
"""

import logging
import os

from provision_agent.drivers import initramfs, kernel_cmdline
from provision_agent.drivers.chroot import bound

LOG = logging.getLogger(__name__)

BOOTLOADER_ID = "debian"


def boot_mode(wanted, efi_dir="/sys/firmware/efi"):
    if wanted in ("bios", "uefi"):
        return wanted
    return "uefi" if os.path.isdir(efi_dir) else "bios"


def _root_uuid(runner, root):
    res = runner.run(["findmnt", "-n", "-o", "UUID", "--target", root], check=False)
    return res.stdout.strip() or None


def esp_location(runner, root, sys_block="/sys/class/block"):
    """(disk device, partition number) of the ESP mounted under root, or None (e.g. on md)."""
    res = runner.run(["findmnt", "-n", "-o", "SOURCE", "--target", f"{root}/boot/efi"],
                     check=False)
    name = os.path.basename(os.path.realpath(res.stdout.strip())) if res.stdout.strip() else ""
    part = os.path.join(sys_block, name)
    try:
        with open(os.path.join(part, "partition")) as f:
            number = f.read().strip()
    except OSError:
        return None
    return "/dev/" + os.path.basename(os.path.dirname(os.path.realpath(part))), number


def _nvram_entry(runner, root):
    # Only an extra: the removable path boots without it, so a failure is logged, not fatal.
    where = esp_location(runner, root)
    if not where:
        LOG.warning("bootloader: ESP is not a plain partition; no efibootmgr entry")
        return
    runner.run(["efibootmgr", "-c", "-d", where[0], "-p", where[1], "-L", BOOTLOADER_ID,
                "-l", f"\\EFI\\{BOOTLOADER_ID}\\grubx64.efi"], check=False)


def install_commands(mode, targets, root, in_chroot):
    """The grub-install argument lists, in order (pure, for the plan and for tests)."""
    if mode == "bios":
        extra = [] if in_chroot else [f"--boot-directory={root}/boot"]
        return [["grub-install", "--target=i386-pc", *extra, t] for t in targets]
    efi = "/boot/efi" if in_chroot else f"{root}/boot/efi"
    extra = [] if in_chroot else [f"--boot-directory={root}/boot"]
    base = ["grub-install", "--target=x86_64-efi", f"--efi-directory={efi}", *extra,
            "--no-nvram"]
    return [base + [f"--bootloader-id={BOOTLOADER_ID}"], base + ["--removable"]]


def install(runner, root, args):
    mode = boot_mode(args.get("boot_mode") or "auto")
    targets = args.get("targets") or []
    kernel_cmdline.set_cmdline(root, args.get("kernel_params"), _root_uuid(runner, root))
    with bound(runner, root) as ch:
        initramfs.regenerate(ch)
        in_chroot = ch.has("grub-install")
        LOG.info("bootloader: grub-install from the %s", "image" if in_chroot else "ramdisk")
        for argv in install_commands(mode, targets, root, in_chroot):
            (ch.run if in_chroot else runner.run)(argv)
        if mode == "uefi" and os.path.isdir("/sys/firmware/efi/efivars"):
            _nvram_entry(runner, root)
        if ch.has("grub-mkconfig"):
            ch.run(["grub-mkconfig", "-o", "/boot/grub/grub.cfg"])
        else:
            runner.run(["grub-mkconfig", "-o", f"{root}/boot/grub/grub.cfg"])
    return mode
