"""The bootloader step the RHEL family's way (RHEL, CentOS Stream, Rocky, AlmaLinux, Fedora):

- BIOS: the image's grub2-install on each target disk, grub2-mkconfig -o /boot/grub2/grub.cfg.
- UEFI: no grub-install. The image's packages (shim-x64, grub2-efi-x64) already put the signed
  shim and grub in the ESP's EFI/<vendor>/ (redhat, rocky, almalinux, centos, fedora), and
  the removable path EFI/BOOT/BOOTX64.EFI (shim again, with fbx64.efi, shim's fallback, which
  makes the NVRAM entry from EFI/<vendor>/BOOTX64.CSV on a first boot without one). Whatever
  of the removable path the image lacks is copied from EFI/<vendor>/; the NVRAM entry starts
  \\EFI\\<vendor>\\shimx64.efi. Since RHEL 9 the EFI/<vendor>/grub.cfg is a stub that finds
  /boot by its filesystem UUID and loads /boot/grub2/grub.cfg: the stub is written again with
  this layout's /boot UUID (the image's names the machine that built it), and grub2-mkconfig
  writes /boot/grub2/grub.cfg. An ESP whose grub.cfg is a whole configuration (RHEL 8) gets
  it from grub2-mkconfig where it is.
- Boot entries: the BLS snippets in /boot/loader/entries are kept, given this run's command
  line and /boot paths (bls.py), and /etc/kernel/cmdline is written for later kernels.

plan() only reads the image and says what will be done (the step logs it and reports it);
run() does it. The ESP is the image's: listings are bounded, only regular files count, and
a copy reads at most MAX_LOADER bytes.
"""

import logging
import os
import stat
from dataclasses import dataclass, field

from provision_agent.drivers import bls, image_family, secure_boot, target
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

SHIM = "shimx64.efi"
GRUB = "grubx64.efi"
FALLBACK = "fbx64.efi"
REMOVABLE_DIR = "BOOT"
REMOVABLE = "BOOTX64.EFI"
GRUB2_CFG = "/boot/grub2/grub.cfg"
ESP = "/boot/efi"
MAX_VENDORS = 64
MAX_LOADER = 64 << 20
MAX_STUB = 4096


@dataclass
class Plan:
    mode: str
    config: str                         # where grub2-mkconfig writes
    install: list = field(default_factory=list)     # grub2-install argument lists (BIOS)
    vendor: str | None = None           # EFI/<vendor>/ holding the image's shim (UEFI)
    label: str = ""
    stub: bool = False                  # EFI/<vendor>/grub.cfg written to load config
    copies: list = field(default_factory=list)      # (from, to) inside the ESP
    entries: list = field(default_factory=list)     # BLS entry names
    lines: list = field(default_factory=list)       # what the plan says, in order


def _files(directory):
    """{lower-case name: stored name} of the regular files in directory (bounded)."""
    try:
        with os.scandir(directory) as it:
            found = {e.name.lower(): e.name for e, _ in zip(it, range(1024))
                     if e.is_file(follow_symlinks=False)}
    except OSError:
        return {}
    return found


def vendors(root):
    """{vendor directory: its files} for each EFI/<vendor>/ in the ESP holding shimx64.efi."""
    efi = target.resolve(root, f"{ESP}/EFI")
    try:
        with os.scandir(efi) as it:
            names = sorted(e.name for e, _ in zip(it, range(4 * MAX_VENDORS))
                           if e.is_dir(follow_symlinks=False))[:MAX_VENDORS]
    except OSError:
        return {}
    found = {n: _files(os.path.join(efi, n)) for n in names if n.upper() != REMOVABLE_DIR}
    return {n: files for n, files in found.items() if SHIM in files}


def choose_vendor(family, found):
    """(vendor directory, why): the family ID's own when it holds a shim, else the only one."""
    own = image_family.efi_vendor(family)
    if own in found:
        return own, f"os-release ID {family.os_id}"
    if len(found) == 1:
        return next(iter(found)), "the only one with a shim"
    if not found:
        raise ImageError(f"the image's ESP ({ESP}/EFI/<vendor>/) has no {SHIM}: a "
                         f"RHEL-family image boots UEFI through its own shim; install "
                         f"shim-x64 and grub2-efi-x64 in the image (their files go to "
                         f"{ESP}/EFI/)")
    raise ImageError(f"the image's ESP holds {SHIM} in {', '.join(sorted(found))}, and "
                     f"/etc/os-release (ID={family.os_id or 'none'}) names none of them: "
                     "remove the others from the image")


def _is_stub(text):
    """RHEL 9's EFI/<vendor>/grub.cfg: a few lines that load /boot's grub2/grub.cfg."""
    words = text.split()
    return 0 < len(text) < MAX_STUB and "configfile" in words and "menuentry" not in words \
        and "blscfg" not in words


def _label(root, vendor):
    name = image_family.os_release(root).get("NAME", "")
    clean = "".join(c for c in name if c.isprintable() and c not in "\\\"'")[:64].strip()
    return clean or vendor


def _uefi(root, family, boot):
    found = vendors(root)
    vendor, why = choose_vendor(family, found)
    files = found[vendor]
    boot.vendor, boot.label = vendor, _label(root, vendor)
    boot.lines.append(f"grub2 (uefi) via the image's shim EFI/{vendor}/{SHIM} ({why}), "
                      f"NVRAM entry {boot.label!r}; no grub2-install")
    if GRUB not in files:
        raise ImageError(f"the image's EFI/{vendor}/ has {SHIM} but no {GRUB}, which shim "
                         "starts: install grub2-efi-x64 in the image")
    removable = _files(target.resolve(root, f"{ESP}/EFI/{REMOVABLE_DIR}"))
    src = f"EFI/{vendor}/"
    if REMOVABLE.lower() not in removable:
        boot.copies.append((src + files[SHIM], f"EFI/{REMOVABLE_DIR}/{REMOVABLE}"))
    if FALLBACK not in removable and GRUB not in removable:
        # shim started from EFI/BOOT runs fbx64.efi beside it, else the grubx64.efi beside it
        boot.copies.append((src + files[GRUB], f"EFI/{REMOVABLE_DIR}/{GRUB}"))
    boot.lines.append("removable path: " + (
        ", ".join(f"{b} copied from {a}" for a, b in boot.copies) if boot.copies else
        f"EFI/{REMOVABLE_DIR}/{REMOVABLE}, the image's own"
        + (f" with {FALLBACK}" if FALLBACK in removable else "")))
    cfg = f"{ESP}/EFI/{vendor}/grub.cfg"
    text = image_family.read_small(root, cfg, MAX_STUB + 1) if "grub.cfg" in files else ""
    if text and not _is_stub(text):
        boot.config = cfg
        boot.lines.append(f"grub2-mkconfig -o {cfg} (the image's ESP holds its whole grub "
                          "configuration, as RHEL 8 does)")
    else:
        boot.stub = True
        boot.lines.append(f"grub2-mkconfig -o {GRUB2_CFG}; EFI/{vendor}/grub.cfg written to "
                          "find /boot by this layout's UUID and load it")


def plan(root, mode, targets, family):
    """What the RHEL-family way does with this image (reads only)."""
    boot = Plan(mode, GRUB2_CFG)
    boot.lines.append(f"image family RHEL ({family.why})")
    if mode == "uefi":
        _uefi(root, family, boot)
    else:
        if not image_family.has_tool(root, "grub2-install"):
            raise ImageError("BIOS boot of a RHEL-family image needs its grub2-install and "
                             "i386-pc modules: install grub2-pc in the image")
        boot.install = [["grub2-install", "--target=i386-pc", t] for t in targets]
        boot.lines.append(f"grub2 (bios): the image's grub2-install on {', '.join(targets)}; "
                          f"grub2-mkconfig -o {GRUB2_CFG}")
    if not image_family.has_tool(root, "grub2-mkconfig"):
        raise ImageError("the RHEL-family image has no grub2-mkconfig: install grub2-tools in "
                         "the image")
    boot.entries = bls.entry_names(root)
    boot.lines.append(f"BLS entries in {bls.ENTRIES} kept ({len(boot.entries)}), given this "
                      f"run's command line; {bls.KERNEL_CMDLINE} written" if boot.entries
                      else f"no BLS entry in {bls.ENTRIES}: grub2-mkconfig's menu entries")
    return boot


def secure_boot_problems(root, boot):
    """What the image's chain lacks for Secure Boot: shim and grub in EFI/<vendor>/ signed."""
    return [f"{ESP}/EFI/{boot.vendor}/{name} is not signed" for name in (SHIM, GRUB)
            if not secure_boot.signed(target.resolve(root, f"{ESP}/EFI/{boot.vendor}/{name}"))]


def _copy(root, src, dst):
    fd = os.open(target.resolve(root, f"{ESP}/{src}"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ImageError(f"{ESP}/{src} in the image is not a regular file")
        data = f.read(MAX_LOADER + 1)
    if len(data) > MAX_LOADER:
        raise ImageError(f"{ESP}/{src} in the image is larger than {MAX_LOADER} bytes")
    target.write_bytes(root, f"{ESP}/{dst}", data)


def _stub(runner, root, vendor):
    boot_dir = target.resolve(root, "/boot")
    res = runner.run(["findmnt", "-n", "-o", "UUID,TARGET", "--target", boot_dir])
    uuid, where = (res.stdout.split() + ["", ""])[:2]
    prefix = "/grub2" if os.path.realpath(where) == os.path.realpath(boot_dir) else "/boot/grub2"
    text = ("# Written by provision: /boot of this layout, as the image's own stub does.\n"
            f"search --no-floppy --fs-uuid --set=dev {uuid}\n"
            f"set prefix=($dev){prefix}\nexport $prefix\nconfigfile $prefix/grub.cfg\n")
    target.write_text(root, f"{ESP}/EFI/{vendor}/grub.cfg", text)
    return prefix


def run(runner, chroot, root, boot, cmdline):
    """Carry out plan boot in the image (chroot: its tools); the report's part of it."""
    for argv in boot.install:
        chroot.run(argv)
    for src, dst in boot.copies:
        _copy(root, src, dst)
    if boot.stub:
        _stub(runner, root, boot.vendor)
    boot_dir = target.resolve(root, "/boot")
    res = runner.run(["findmnt", "-n", "-o", "TARGET", "--target", boot_dir], check=False)
    own = os.path.realpath(res.stdout.strip() or "/") == os.path.realpath(boot_dir)
    chroot.run(["grub2-mkconfig", "-o", boot.config])
    # after grub2-mkconfig, which on some releases rewrites the entries' options itself
    written = bls.update(root, cmdline, "" if own else "/boot") if boot.entries else {}
    if written.get("kernelopts"):
        # RHEL 8's entries: options $kernelopts, from grubenv; grub2-mkconfig sets it too,
        # but only where its own scripts do, so it is set here for certain
        chroot.run(["grub2-editenv", "-", "set", f"kernelopts={bls.options(cmdline, '')}"])
    kernel = bls.write_kernel_cmdline(root, cmdline)
    return {"family": "rhel", "plan": boot.lines, "grub_cfg": boot.config,
            "bls_entries": written.get("entries", []), "kernel_cmdline": kernel,
            # read back from the files, as the installed system's grub will read them
            "bls_options": bls.read_options(root),
            **({"efi_vendor": boot.vendor} if boot.vendor else {})}
