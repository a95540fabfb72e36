"""The signed boot chain for UEFI Secure Boot: what the image must carry, and what the ESP
holds once grub-install put it there.

The chain is the distribution's own: firmware trusts shim (signed by Microsoft's UEFI CA, the
key OEM firmware ships enrolled), shim trusts the distribution's key, which signed grub and the
kernel. provision signs nothing and enrols no key; it installs what the image brings, through
the image's grub-install (Debian and Ubuntu: --uefi-secure-boot copies shim, the signed grub
and MokManager from the packages into the ESP). Whether the firmware trusts a signature is the
firmware's business and is proven only by booting (the lab does); here each piece is checked to
carry an Authenticode signature at all, so an image without the signed packages, or with an
unsigned kernel, is refused with its name instead of leaving a machine that stops at a
firmware "Access Denied" with nobody at its console.

Everything read is the image's (untrusted): paths resolve inside the target root, and each read
is a few bytes at offsets checked against the file's size.
"""

import os
import stat
import struct

from provision_agent.drivers import target
from provision_agent.errors import EXIT_IMAGE_ERROR, ProvisionError

# where Debian's and Ubuntu's packages put the signed binaries grub-install copies
NEEDED = (
    ("/usr/lib/shim/shimx64.efi.signed", "shim-signed"),
    ("/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed", "grub-efi-amd64-signed"),
)
KERNEL_PREFIX = "vmlinuz-"
MAX_KERNELS = 64
# what grub-install --uefi-secure-boot leaves in the ESP (relative to it): shim under the
# bootloader id and as the removable path's loader, the signed grub beside each (shim starts
# the grubx64.efi next to itself; a fresh NVRAM, as after the BMC switched Secure Boot on,
# has no entry and boots the removable path)
SHIM = "shimx64.efi"
GRUB = "grubx64.efi"
REMOVABLE = "EFI/BOOT/BOOTX64.EFI"
_CERT_TABLE = 4                     # the PE data directory of the Authenticode signatures
# where the data directories start in the optional header: PE32, PE32+
_DIRS_AT = {0x10B: 96, 0x20B: 112}
_WIN_CERT_PKCS_SIGNED_DATA = 0x0002


class SecureBootError(ProvisionError):
    """The image cannot boot under Secure Boot: the message says what it lacks."""
    exit_code = EXIT_IMAGE_ERROR


def signed(path):
    """Whether the PE file at path (already resolved, not followed further) carries an
    Authenticode signature: a certificate table inside the file that starts with a
    WIN_CERTIFICATE of type PKCS#7 signed data."""
    try:
        # O_NONBLOCK: a FIFO the image put there must not hold the run at open()
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):     # nor a device node read in its place
            return False
        size = info.st_size
        head = f.read(4096)
        if len(head) < 0x40 or head[:2] != b"MZ":
            return False
        pe = struct.unpack_from("<I", head, 0x3C)[0]
        if pe + 24 + 2 > len(head) or head[pe:pe + 4] != b"PE\0\0":
            return False
        optional = pe + 24
        magic = struct.unpack_from("<H", head, optional)[0]
        if magic not in _DIRS_AT:
            return False
        entry = optional + _DIRS_AT[magic] + 8 * _CERT_TABLE
        if entry + 8 > len(head):
            return False
        offset, length = struct.unpack_from("<II", head, entry)
        if length < 8 or offset + length > size:
            return False
        f.seek(offset)
        cert = f.read(8)
    if len(cert) < 8:
        return False
    cert_length, _revision, cert_type = struct.unpack("<IHH", cert)
    return cert_type == _WIN_CERT_PKCS_SIGNED_DATA and 8 < cert_length <= length


def image_problems(root):
    """What the image lacks for a Secure Boot install (empty: nothing)."""
    problems = [f"{path} (package {package}) is missing or not signed"
                for path, package in NEEDED if not signed(target.resolve(root, path))]
    try:
        names = sorted(n for n in os.listdir(target.resolve(root, "/boot"))
                       if n.startswith(KERNEL_PREFIX))
    except OSError:
        names = []
    if not names:
        problems.append(f"no kernel (/boot/{KERNEL_PREFIX}*) in the image")
    # grub-mkconfig offers every one of them: each must boot
    for name in names[:MAX_KERNELS]:
        if not signed(target.resolve(root, f"/boot/{name}")):
            problems.append(f"/boot/{name} is not signed (grub, through shim, would refuse "
                            "to load it)")
    return problems


def check_image(root):
    problems = image_problems(root)
    if problems:
        raise SecureBootError("Secure Boot was asked for, but the image cannot boot with it: "
                              + "; ".join(problems) + ". Install the signed boot packages in "
                              "the image, or deploy without secure_boot")


def check_installed(root, bootloader_id):
    """After grub-install: the loaders firmware starts (in the ESP at /boot/efi) are the
    signed ones."""
    wanted = [f"EFI/{bootloader_id}/{SHIM}", f"EFI/{bootloader_id}/{GRUB}", REMOVABLE,
              f"EFI/BOOT/{GRUB}"]
    unsigned = [w for w in wanted if not signed(target.resolve(root, f"/boot/efi/{w}"))]
    if unsigned:
        raise SecureBootError("grub-install --uefi-secure-boot left unsigned or no loaders in "
                              f"the ESP: {', '.join(unsigned)} (the image's grub-install does "
                              "not install the signed chain)")
