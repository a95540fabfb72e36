"""Which family an image belongs to, read from its own files: the conventions its bootloader,
initramfs and /etc files follow.

- "debian" (Debian, Ubuntu and what names them in ID_LIKE): grub-install, grub-mkconfig,
  /boot/grub/grub.cfg, update-initramfs, /etc/mdadm/mdadm.conf. What provision did for every
  image before families were told apart, and still does for an image it cannot place.
- "rhel" (RHEL, CentOS Stream, Rocky, AlmaLinux, Oracle Linux, Fedora, and what names one of
  them in ID_LIKE): grub2-install, grub2-mkconfig, /boot/grub2/grub.cfg, boot entries as BLS
  snippets in /boot/loader/entries, UEFI through the signed shim in the ESP's EFI/<vendor>/,
  dracut, /etc/mdadm.conf, SELinux.

/etc/os-release decides (ID, then ID_LIKE); without one, the tools do: an image with
grub2-mkconfig and no grub-mkconfig is taken as RHEL-family. Everything read is the image's
(untrusted): paths resolve inside the target root, reads are bounded, nothing is followed out.
"""

import os
import re
import stat
from dataclasses import dataclass

from provision_agent.drivers import target

MAX_FILE = 64 * 1024
RHEL_IDS = ("rhel", "centos", "rocky", "almalinux", "ol", "fedora", "circle", "eurolinux",
            "cloudlinux", "navy")
DEBIAN_IDS = ("debian", "ubuntu")
TOOL_DIRS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
# the ESP directory a distribution's shim and grub live in (EFI/<vendor>/), by os-release ID
EFI_VENDOR = {"rhel": "redhat", "ol": "redhat", "centos": "centos", "rocky": "rocky",
              "almalinux": "almalinux", "fedora": "fedora"}
_WORD = re.compile(r"[A-Za-z0-9._-]{1,64}")
_SELINUX = re.compile(r"^\s*SELINUX\s*=\s*(\w+)\s*$", re.M)


def read_small(root, path, limit=MAX_FILE):
    """The text of the image's file at path (at most limit bytes), or "" when it has none or
    it is not a regular file (a FIFO or device the image put there is never opened for read)."""
    try:
        fd = os.open(target.resolve(root, path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return ""
        return f.read(limit).decode("utf-8", errors="replace")


def os_release(root):
    """{KEY: value} of the image's /etc/os-release (else /usr/lib/os-release)."""
    text = read_small(root, "/etc/os-release") or read_small(root, "/usr/lib/os-release")
    found = {}
    for line in text.splitlines()[:200]:
        key, sep, value = line.partition("=")
        if sep and key.strip().isidentifier():
            found[key.strip()] = value.strip().strip("\"'")
    return found


def has_tool(root, program):
    """Whether the image ships program in a usual bin/sbin directory, looked up as the image
    sees its own paths (an absolute /sbin link leads into the image, not the ramdisk)."""
    return any(os.access(target.resolve(root, f"{d}/{program}"), os.X_OK) for d in TOOL_DIRS)


@dataclass
class Family:
    """`name`: "rhel" or "debian"; `os_id`: os-release's ID ("" when none); `why`: what
    decided, for the plan and the log."""
    name: str
    os_id: str
    version: str
    why: str

    @property
    def rhel(self):
        return self.name == "rhel"


def detect(root):
    info = os_release(root)
    os_id = info.get("ID", "").lower()
    os_id = os_id if _WORD.fullmatch(os_id) else ""
    like = [w for w in info.get("ID_LIKE", "").lower().split()[:8] if _WORD.fullmatch(w)]
    version = info.get("VERSION_ID", "")[:32]
    shown = f"ID={os_id}" + (f", ID_LIKE={' '.join(like)}" if like else "")
    if os_id in RHEL_IDS:
        return Family("rhel", os_id, version, f"/etc/os-release {shown}")
    if os_id in DEBIAN_IDS:
        return Family("debian", os_id, version, f"/etc/os-release {shown}")
    for word in like:
        if word in RHEL_IDS:
            return Family("rhel", os_id, version, f"/etc/os-release {shown}")
        if word in DEBIAN_IDS:
            return Family("debian", os_id, version, f"/etc/os-release {shown}")
    if has_tool(root, "grub2-mkconfig") and not has_tool(root, "grub-mkconfig"):
        return Family("rhel", os_id, version, "grub2-mkconfig and no grub-mkconfig in the "
                      "image" + (f" (/etc/os-release {shown})" if os_id else ""))
    return Family("debian", os_id, version, "no RHEL-family sign in the image"
                  + (f" (/etc/os-release {shown})" if os_id else " (no /etc/os-release)"))


def selinux_enforcing(root):
    """Whether the image's /etc/selinux/config sets SELINUX=enforcing."""
    found = _SELINUX.findall(read_small(root, "/etc/selinux/config"))
    return bool(found) and found[-1].lower() == "enforcing"


def mdadm_conf_path(family):
    """Where the family's mdadm and its initramfs hook read mdadm.conf."""
    return "/etc/mdadm.conf" if family.rhel else "/etc/mdadm/mdadm.conf"


def efi_vendor(family):
    """The ESP directory the family's own ID names (None when it names none)."""
    return EFI_VENDOR.get(family.os_id)
