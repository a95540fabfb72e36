"""grub2 for BIOS (i386-pc on every target disk) and UEFI (x86_64-efi, removable path too).

UEFI installs into the ESP mounted at /boot/efi (plus the removable EFI/BOOT/BOOTX64.EFI path,
so firmware without an NVRAM entry still boots), then copies that ESP onto the unused ESPs of
the other target disks: any one disk boots alone. The image's grub is used when it has one,
else the ramdisk's with --boot-directory/--efi-directory pointing into the target (and, when
the image has no grub-mkconfig either, a minimal grub.cfg of our own: see grub_config).
With secure_boot, only the image's grub-install will do (it alone has the signed binaries that
match the image's kernel and config): it installs shim and the signed grub (secure_boot.py).

That is the Debian family's way, and what an image no family claims gets. A RHEL-family image
(image_family.py reads its /etc/os-release) is done its own way: bootloader_rhel.py. Either
way, an image whose initramfs tool is dracut gets the rd.* words its / needs on the command
line and the dracut modules for it in a rebuilt initramfs (dracut.py).
"""

import logging
import os
from concurrent.futures import ThreadPoolExecutor

from provision_agent.drivers import (
    bootloader_rhel,
    dracut,
    grub_config,
    image_family,
    initramfs,
    kernel_cmdline,
    mount,
    nvram,
    secure_boot,
    target,
)
from provision_agent.drivers.chroot import bound
from provision_agent.drivers.secure_boot import SecureBootError
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

BOOTLOADER_ID = "debian"
GRUB_DIR = "/boot/grub"
# grub-mkconfig's output while grub-install runs: renamed to grub.cfg after the installs' sync
PENDING_CFG = GRUB_DIR + "/grub.cfg.provision"


def boot_mode(wanted, efi_dir="/sys/firmware/efi"):
    if wanted in ("bios", "uefi"):
        return wanted
    return "uefi" if os.path.isdir(efi_dir) else "bios"


def _root_uuid(runner, root):
    res = runner.run(["findmnt", "-n", "-o", "UUID", "--target", root], check=False)
    return res.stdout.strip() or None


def esp_partitions(device, sys_block="/sys/class/block"):
    """[(disk device, partition number)] holding an ESP: the partition itself, or the member
    partitions of an md RAID1 (metadata 1.0, so firmware reads each member as plain vfat)."""
    name = os.path.basename(os.path.realpath(device)) if device else ""
    if not name:
        return []
    node = os.path.join(sys_block, name)
    try:
        with open(os.path.join(node, "partition")) as f:
            number = f.read().strip()
    except OSError:
        try:
            members = sorted(os.listdir(os.path.join(node, "slaves")))
        except OSError:
            return []
        return [w for m in members for w in esp_partitions(m, sys_block)]
    return [("/dev/" + os.path.basename(os.path.dirname(os.path.realpath(node))), number)]


def _nvram_entries(runner, root, copies, loader, vendor=BOOTLOADER_ID, label=BOOTLOADER_ID):
    # Only an extra: the removable path boots without it, so a failure is logged, not fatal.
    res = runner.run(["findmnt", "-n", "-o", "SOURCE", "--target", f"{root}/boot/efi"],
                     check=False)
    places = [w for device in [res.stdout.strip()] + list(copies)
              for w in esp_partitions(device)]
    if not places:
        LOG.warning("bootloader: no partition found under the ESP %s; no efibootmgr entry",
                    res.stdout.strip() or "(none mounted)")
    nvram.write_entries(runner, [
        (disk, number, label if i == 0 else f"{label} ({disk})",
         f"\\EFI\\{vendor}\\{loader}") for i, (disk, number) in enumerate(places)],
        disks=[disk for disk, _ in places])


def sync_esps(runner, root, copies):
    """Copy the ESP at /boot/efi onto each copy (already vfat, made empty by this run)."""
    for device in copies:
        LOG.info("bootloader: copying the ESP onto %s", device)
        mount.copy_into(runner, f"{root}/boot/efi", device, "vfat")


def install_commands(mode, targets, root, in_chroot, signed=False):
    """The grub-install argument lists, in order (pure, for the plan and for tests); signed:
    shim and the signed grub (Debian's and Ubuntu's --uefi-secure-boot)."""
    if mode == "bios":
        extra = [] if in_chroot else [f"--boot-directory={root}/boot"]
        return [["grub-install", "--target=i386-pc", *extra, t] for t in targets]
    efi = "/boot/efi" if in_chroot else f"{root}/boot/efi"
    extra = [] if in_chroot else [f"--boot-directory={root}/boot"]
    base = ["grub-install", "--target=x86_64-efi", f"--efi-directory={efi}", *extra,
            "--no-nvram", *(["--uefi-secure-boot"] if signed else [])]
    return [base + [f"--bootloader-id={BOOTLOADER_ID}"], base + ["--removable"]]


def install(runner, root, args):
    """The boot mode installed for (what the plan's step reports: install_report)."""
    return install_report(runner, root, args)["boot_mode"]


def targets_for(args, mode):
    """The step's disks for the mode the machine boots in: with boot_mode auto the plan
    carries a UEFI machine's own where they differ (plan/boot_targets.py)."""
    if mode == "uefi" and args.get("uefi_targets") is not None:
        return list(args["uefi_targets"])
    return list(args.get("targets") or [])


def install_report(runner, root, args):
    mode = boot_mode(args.get("boot_mode") or "auto")
    targets = targets_for(args, mode)
    if args.get("type") == "image":
        nvram.image_entries(runner, mode, targets)
        return {"boot_mode": mode}
    copies = args.get("esp_copies") or []
    signed = bool(args.get("secure_boot"))
    family = image_family.detect(root)
    if signed and mode != "uefi":
        raise SecureBootError("Secure Boot was asked for, but this machine boots in BIOS mode "
                              "(boot_mode auto found no /sys/firmware/efi)")
    if signed and not family.rhel:
        secure_boot.check_image(root)
    root_uuid = _root_uuid(runner, root)
    modules, words = _dracut_needs(runner, root)
    params = " ".join([args.get("kernel_params") or ""] + [
        w for w in words if w not in (args.get("kernel_params") or "").split()]).strip()
    kernel_cmdline.set_cmdline(root, params, root_uuid)
    with bound(runner, root) as ch:
        if family.rhel:
            report = _rhel_way(runner, ch, root, args, family, mode, targets, signed, modules,
                               kernel_cmdline.merge(params, root_uuid))
        else:
            LOG.info("bootloader: image family Debian (%s)", family.why)
            _debian_way(runner, ch, root, args, mode, targets, signed, modules,
                        kernel_cmdline.merge(params, root_uuid))
            report = {"family": "debian", "plan": [f"image family Debian ({family.why})"]}
    if signed and not family.rhel:
        secure_boot.check_installed(root, BOOTLOADER_ID)
    if mode == "uefi":
        sync_esps(runner, root, copies)
        if nvram.efi_booted():
            vendor = report.get("efi_vendor", BOOTLOADER_ID)
            _nvram_entries(runner, root, copies, secure_boot.SHIM if signed or family.rhel
                           else "grubx64.efi", vendor, report.get("nvram_label", vendor))
    elif copies:
        LOG.info("bootloader: BIOS mode, so %s stay empty ESPs", ", ".join(copies))
    return {"boot_mode": mode, **report}


def _dracut_needs(runner, root):
    """(modules, rd.* words) for an image whose initramfs tool is dracut; nothing otherwise
    (initramfs-tools finds what / stands on by itself)."""
    if image_family.has_tool(root, "update-initramfs") or \
            not image_family.has_tool(root, "dracut"):
        return [], []
    modules, words = dracut.needs(runner, dracut.root_stack(runner, root))
    LOG.info("bootloader: dracut image; / needs %s%s", " ".join(modules) or "no module",
             f", on the command line: {' '.join(words)}" if words else "")
    return modules, words


def _kernel_versions(root):
    try:
        return [v for v, _ in grub_config.kernels(target.resolve(root, "/boot"))]
    except OSError:
        return []


def _debian_way(runner, ch, root, args, mode, targets, signed, modules, cmdline):
    in_chroot = ch.has("grub-install")
    if signed and not in_chroot:
        raise SecureBootError("Secure Boot was asked for, but the image has no "
                              "grub-install: the ramdisk's grub is not signed")
    _unconfigured(root)
    if _rebuild_initramfs(args, root):
        initramfs.regenerate(ch, _kernel_versions(root), modules)
    LOG.info("bootloader: grub-install from the %s%s", "image" if in_chroot else "ramdisk",
             ", signed chain (shim, signed grub)" if signed else "")
    mkconfig = ch.has("grub-mkconfig")
    # grub-mkconfig reads the image's /etc/default/grub, /etc/grub.d and /boot, nothing
    # grub-install writes (05_debian_theme only needs /boot/grub to exist), so it runs beside
    # the installs: under emulation it took 10-19 s, each grub-install 2.5-3 s (issue 58).
    if mkconfig:
        os.makedirs(target.resolve(root, GRUB_DIR), exist_ok=True)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="grub-mkconfig") as pool:
        config = pool.submit(ch.run, ["grub-mkconfig", "-o", PENDING_CFG]) if mkconfig \
            else None
        for argv in install_commands(mode, targets, root, in_chroot, signed):
            (ch.run if in_chroot else runner.run)(argv)
        # what the run wrote is on the disks before the configuration that makes them boot it
        runner.run(["sync"])
    if config is None:
        grub_config.write(runner, root, cmdline)
        return
    config.result()
    where = target.resolve(root, GRUB_DIR)
    pending = os.path.join(where, os.path.basename(PENDING_CFG))
    if not os.path.isfile(pending):
        raise ImageError(f"the image's grub-mkconfig exited 0 but wrote no {PENDING_CFG}")
    os.replace(pending, os.path.join(where, "grub.cfg"))


def _unconfigured(root):
    """Remove a grub.cfg the target has (the image's own, a kept /boot's old one) before grub
    is installed: until this step writes its own last, grub finds no configuration, so a power
    cut in the middle leaves a disk that stops at grub's prompt instead of one that boots a
    system this run has not finished (or the one it replaced) by another configuration."""
    grub_dir = target.resolve(root, GRUB_DIR)
    for stale in (PENDING_CFG, PENDING_CFG + ".new"):     # an earlier run cut short
        where = os.path.join(grub_dir, os.path.basename(stale))
        if os.path.lexists(where) and not os.path.isdir(where):
            os.unlink(where)
    where = os.path.join(grub_dir, "grub.cfg")
    if os.path.lexists(where) and not os.path.isdir(where):
        os.unlink(where)
        LOG.info("bootloader: removed the grub.cfg the target had; the one written at the end "
                 "of this step replaces it")


def _rhel_way(runner, ch, root, args, family, mode, targets, signed, modules, cmdline):
    boot = bootloader_rhel.plan(root, mode, targets, family)
    if signed:
        problems = bootloader_rhel.secure_boot_problems(root, boot) + [
            p for p in secure_boot.image_problems(root) if "/boot/" in p]
        if problems:
            raise SecureBootError("Secure Boot was asked for, but the image cannot boot with "
                                  "it: " + "; ".join(problems))
    for line in boot.lines:
        LOG.info("bootloader: %s", line)
    if _rebuild_initramfs(args, root):
        initramfs.regenerate(ch, _kernel_versions(root), modules)
    report = bootloader_rhel.run(runner, ch, root, boot, cmdline)
    return {**report, "nvram_label": boot.label} if boot.vendor else report


def _rebuild_initramfs(args, root):
    """The plan's choice (plan/initramfs_policy.py), unless it keeps an initramfs the image
    does not have: a kernel without one would not find its root."""
    if args.get("initramfs", "rebuild") == "rebuild":
        return True
    boot = target.resolve(root, "/boot")
    needs = args.get("initramfs_needs") or []
    try:
        found = grub_config.kernels(boot)
    except OSError:
        found = []
    bare = [version for version, initrd in found if not initrd]
    if not found or bare:
        LOG.info("initramfs: the plan keeps the image's own, but %s: rebuilt",
                 f"kernel {', '.join(bare)} has none" if bare else "the image has no kernel "
                 "in /boot")
        return True
    missing = initramfs.lacking(boot, found, needs)
    if missing:
        LOG.info("initramfs: the plan keeps the image's own, but it lacks %s: rebuilt",
                 ", ".join(missing))
        return True
    LOG.info("initramfs: the image's own is kept (/ is its filesystem%s)",
             f"; it carries {' and '.join(needs)}, which assemble what this run made"
             if needs else " on a plain device: nothing this run made has to be in it")
    return False
