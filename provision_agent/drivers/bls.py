"""Boot Loader Specification entries, as RHEL-family images keep their kernels' menu entries
(/boot/loader/entries/<machine-id>-<version>.conf, read by grub2's blscfg), and the kernel
command line the family's kernel-install gives new kernels (/etc/kernel/cmdline).

The entries came with the image, written on the machine that built it: their `options` name
that machine's root (and, on an image built with LVM, its volume group in rd.lvm.lv=), and
their `linux`/`initrd` paths assume its /boot (a filesystem of its own: /vmlinuz-...; a
directory of /: /boot/vmlinuz-...). So each entry is kept, with its `options` set to this
run's command line and its paths to where this layout's /boot puts them. The image's grub
variables in `options` (`$tuned_params`, set in grubenv by tuned) stay. An entry whose options
are `$kernelopts` (RHEL 8) is left as it is: kernelopts is set in grubenv (grub2-editenv, as
grub2-mkconfig does from GRUB_CMDLINE_LINUX, which the bootloader step has written too).
grubby would make the same edits on a booted system; here they are made directly, so the
result does not depend on what grubby finds of the ramdisk in the chroot.
"""

import logging
import os

from provision_agent.drivers import image_family, target

LOG = logging.getLogger(__name__)

ENTRIES = "/boot/loader/entries"
KERNEL_CMDLINE = "/etc/kernel/cmdline"
MAX_ENTRIES = 64
KERNELOPTS = "$kernelopts"
PATH_KEYS = ("linux", "initrd", "devicetree")


def entry_names(root):
    """The entries' file names (regular *.conf files), sorted, at most MAX_ENTRIES."""
    try:
        with os.scandir(target.resolve(root, ENTRIES)) as it:
            names = [e.name for e, _ in zip(it, range(16 * MAX_ENTRIES))
                     if e.name.endswith(".conf") and e.is_file(follow_symlinks=False)]
    except OSError:
        return []
    return sorted(names)[:MAX_ENTRIES]


def options(cmdline, old):
    """The new `options` value: this run's command line with `ro` after root= (the family's
    own entries carry it; systemd remounts / as fstab says), and the image's grub variables."""
    words = cmdline.split()
    at = next((i + 1 for i, w in enumerate(words) if w.startswith("root=")), 0)
    if "ro" not in words and "rw" not in words:
        words.insert(at, "ro")
    kept = [w for w in old.split() if w.startswith("$") and w != KERNELOPTS]
    return " ".join(words + [w for w in kept if w not in words])


def rewrite(text, cmdline, prefix, boot_files):
    """(new text, whether its options are $kernelopts): each path whose file is in /boot
    (boot_files) made prefix + its name; `options` set (added when missing)."""
    lines, seen, kernelopts = [], False, False
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "options":
            seen = True
            if KERNELOPTS in value.split():
                kernelopts = True
                lines.append(line)
            else:
                lines.append(f"options {options(cmdline, value)}")
        elif key in PATH_KEYS:
            words = [f"{prefix}/{os.path.basename(w)}"
                     if w.startswith("/") and os.path.basename(w) in boot_files else w
                     for w in value.split()]
            lines.append(f"{key} {' '.join(words)}")
        else:
            lines.append(line)
    if not seen:
        lines.append(f"options {options(cmdline, '')}")
    return "\n".join(lines) + "\n", kernelopts


def update(root, cmdline, prefix):
    """Rewrite every entry; {"entries": [names], "kernelopts": [names left to grubenv]}."""
    try:
        boot_files = set(os.listdir(target.resolve(root, "/boot"))[:4096])
    except OSError:
        boot_files = set()
    done, left = [], []
    for name in entry_names(root):
        path = f"{ENTRIES}/{name}"
        text, kernelopts = rewrite(image_family.read_small(root, path), cmdline, prefix,
                                   boot_files)
        target.write_text(root, path, text)
        (left if kernelopts else done).append(name)
    LOG.info("bls: %d entries given the command line%s", len(done),
             f"; {', '.join(left)} take it from grubenv ($kernelopts)" if left else "")
    return {"entries": done, "kernelopts": left}


def write_kernel_cmdline(root, cmdline):
    """/etc/kernel/cmdline: what kernel-install puts in the entry of a kernel installed later
    (else it copies /proc/cmdline, which on a booted system is this one anyway)."""
    text = options(cmdline, "") + "\n"
    target.write_text(root, KERNEL_CMDLINE, text)
    return text.strip()


def read_options(root):
    """{entry name: its options value}: what the entries hold now (for the report)."""
    found = {}
    for name in entry_names(root):
        for line in image_family.read_small(root, f"{ENTRIES}/{name}").splitlines():
            key, _, value = line.strip().partition(" ")
            if key == "options":
                found[name] = value.strip()
    return found
