"""Which loader on a whole-disk image's ESP an NVRAM boot entry should start, and its label.

The order is the one the distributions write down for their own firmware entries: a
`EFI/<vendor>/BOOTX64.CSV` (shim's fallback reads it on a first boot to make the entry itself:
`loader,label,options,description` in UTF-16) names the loader and the label; else the
removable path `EFI/BOOT/BOOTX64.EFI`, which the image's maker put there for firmware with no
entry; else a vendor's shim or grub, else Windows' boot manager. ironic-python-agent makes the
same entry after writing a whole-disk image in UEFI mode (efi_utils.manage_uefi).

The ESP is the image's, so hostile: it is read mounted read-only (by the caller), only two
levels under EFI/ are looked at (MAX_VENDORS directories), each listing is cut at
MAX_ENTRIES names, only regular files count (nothing is followed), a CSV is read up to
MAX_CSV bytes, and what it names must be a plain file name in its own directory and a short
printable label.
"""

import logging
import os
import re
import stat

LOG = logging.getLogger(__name__)

MAX_ENTRIES = 256
MAX_VENDORS = 64            # directories under EFI/ whose names are listed in turn
MAX_CSV = 4096
MAX_LABEL = 64
CSV_NAME = "bootx64.csv"
REMOVABLE = ("boot", "bootx64.efi")
VENDOR_LOADERS = ("shimx64.efi", "grubx64.efi")
WINDOWS = ("microsoft", "boot", "bootmgfw.efi")
# the names firmware is given: no separators, no spaces, nothing a path could climb with
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Loader:
    """`path`: as firmware spells it (\\EFI\\vendor\\file.efi); `label`; `removable`: the
    removable path, which firmware without an entry boots anyway."""

    def __init__(self, parts, label, removable=False, why=""):
        self.path = "\\" + "\\".join(parts)
        self.label = label
        self.removable = removable
        self.why = why

    def __repr__(self):
        return f"Loader({self.path!r}, {self.label!r})"


def _listing(directory):
    """{lower-case name: (stored name, is a directory, is a regular file)}, at most
    MAX_ENTRIES names (sorted, so the cut is the same on every run), never followed."""
    try:
        with os.scandir(directory) as it:
            entries = []
            for entry in it:
                entries.append(entry)
                if len(entries) > 4 * MAX_ENTRIES:
                    break
    except OSError:
        return {}
    found = {}
    for entry in sorted(entries, key=lambda e: e.name)[:MAX_ENTRIES]:
        try:
            # the type readdir gave (FAT gives one): no lookup per name
            kind = (entry.is_dir(follow_symlinks=False), entry.is_file(follow_symlinks=False))
        except OSError:
            continue
        found.setdefault(entry.name.lower(), (entry.name, *kind))
    return found


def _file(listing, name):
    got = listing.get(name)
    return got[0] if got and got[2] and _NAME.fullmatch(got[0]) else None


def _read_csv(path):
    """The CSV's first entry (loader file name, label), or None when it says nothing usable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(MAX_CSV)
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        text = data.decode("utf-16", errors="replace")
    else:
        text = data.decode("utf-16-le", errors="replace")
    for line in text.splitlines():
        fields = line.split(",", 3)
        if len(fields) >= 2 and fields[0].strip():
            return fields[0].strip(), fields[1].strip()
    return None


def _clean_label(label, fallback):
    label = _CONTROL.sub("", label or "").strip()[:MAX_LABEL]
    return label or fallback


def find(esp_dir):
    """The Loader to make an entry for, or None when the ESP holds none of them."""
    top = _listing(esp_dir)
    efi = top.get("efi")
    if not efi or not efi[1]:
        return None
    efi_dir = os.path.join(esp_dir, efi[0])
    vendors = {low: (name, os.path.join(efi_dir, name))
               for low, (name, is_dir, _) in list(_listing(efi_dir).items())[:MAX_VENDORS]
               if is_dir and _NAME.fullmatch(name)}
    listings = {low: _listing(path) for low, (_, path) in vendors.items()}
    for low, (name, path) in vendors.items():
        csv = low != "boot" and _file(listings[low], CSV_NAME)
        entry = csv and _read_csv(os.path.join(path, csv))
        if not entry:
            continue
        loader = _file(listings[low], entry[0].lower())
        if loader and loader.lower().endswith(".efi"):
            return Loader((efi[0], name, loader), _clean_label(entry[1], name),
                          why=f"EFI/{name}/{csv}")
        LOG.warning("nvram: EFI/%s/%s names %r, which is not a loader beside it: ignored",
                    name, csv, entry[0][:MAX_LABEL])
    boot = vendors.get(REMOVABLE[0])
    loader = boot and _file(listings[REMOVABLE[0]], REMOVABLE[1])
    if loader:
        return Loader((efi[0], boot[0], loader), "instance", removable=True,
                      why="the removable path")
    for low, (name, _) in vendors.items():
        for wanted in VENDOR_LOADERS:
            loader = low != "boot" and _file(listings[low], wanted)
            if loader:
                return Loader((efi[0], name, loader), name, why=f"EFI/{name}'s {wanted}")
    ms = vendors.get(WINDOWS[0])
    sub = ms and listings[WINDOWS[0]].get(WINDOWS[1])
    if sub and sub[1]:
        loader = _file(_listing(os.path.join(ms[1], sub[0])), WINDOWS[2])
        if loader:
            return Loader((efi[0], ms[0], sub[0], loader), "Windows Boot Manager",
                          why="Windows' boot manager")
    return None
