"""Secure Boot for the installed system, proven in the VM bench (issue 33): the disks provisioned
by the ramdisk (booted under plain OVMF, as Ironic boots it with Secure Boot off), then booted
alone under OVMF built with Secure Boot, Microsoft's keys enrolled and Secure Boot enforced.

- samples/uefi-secure-boot.json with the test OS that carries Debian's signed chain: boots, and
  the system reports Secure Boot on (the marker's sb=1, read from the SecureBoot variable).
- The test OS without the signed packages: `secure_boot` is refused at the bootloader step
  (exit 5, naming shim-signed) before any grub is installed; installed without `secure_boot`,
  its unsigned grub is refused by the firmware (no marker; OVMF says Access Denied).

About 12 minutes under TCG: `tox -e e2e-secureboot`, outside CI (docs/testing.md); the Ironic
side is tests/ironic/lab/test_secure_boot.py.
"""

import json
import re
import time

from tests.vmbench import FileServer, testos
from tests.vmbench.ramdisk import REPO_ROOT

SAMPLE = REPO_ROOT / "samples" / "uefi-secure-boot.json"
MARKER = r"PROVISION-BOOT-OK cd=\S+ mpath=\S+ root=(\S+) keys=\S+ ud=\S+ sb=(\S+)"
# what OVMF prints when the image it is to start fails its signature check
DENIED = r"Access Denied"
REFUSED_WAIT = 600


def _doc(srv, os_dir, secure_boot):
    doc = json.loads(SAMPLE.read_text())
    tar = os_dir / "root.tar.zst"
    doc["images"] = [{"uri": srv.guest_url(tar.name), "format": "tar", "target": "/",
                      "checksum": testos.checksum(tar)}]
    doc["bootloader"]["secure_boot"] = secure_boot
    return doc


def _provision(make_vm, doc, **vm_args):
    vm = make_vm(disks=1, disk_size="4G", keep_disks=True, serials=["disk0"], firmware="uefi",
                 **vm_args)
    run = vm.provision(doc, ["--debug"])
    return vm, run


def test_the_signed_chain_boots_with_secure_boot_enforced(make_vm):
    os_dir = testos.build_dir("secureboot")
    with FileServer(os_dir) as srv:
        t0 = time.monotonic()
        vm, run = _provision(make_vm, _doc(srv, os_dir, True))
        assert run.returncode == 0, run.log
        esp = vm.ssh(["sh", "-c", "mount /dev/vda1 /mnt && find /mnt/EFI -type f | sort; "
                                  "umount /mnt"]).stdout.split()
        vm.stop()
    provision_s = time.monotonic() - t0
    assert "signed chain (shim, signed grub)" in run.log
    for loader in ("/mnt/EFI/debian/shimx64.efi", "/mnt/EFI/debian/grubx64.efi",
                   "/mnt/EFI/BOOT/BOOTX64.EFI"):
        assert loader in esp, esp
    t0 = time.monotonic()
    booted = make_vm(disk_images=list(vm.disk_images), boot="disk", firmware="uefi-secureboot")
    marker = booted.wait_console(MARKER, timeout=1800)
    boot_s = time.monotonic() - t0
    assert marker.group(2) == "1", marker.group(0)
    text = booted.console_text()
    assert not re.search(DENIED, text)
    booted.stop()
    vm.keep_disks = False
    print(f"secure boot: provision {provision_s:.0f} s, boot to marker with Secure Boot "
          f"enforced {boot_s:.0f} s")


def test_an_image_without_the_signed_chain_is_refused_and_unsigned_grub_does_not_boot(make_vm):
    os_dir = testos.build_dir()
    with FileServer(os_dir) as srv:
        vm, run = _provision(make_vm, _doc(srv, os_dir, True))
        assert run.returncode == 5, run.log
        said = run.stdout + run.stderr
        assert "/usr/lib/shim/shimx64.efi.signed (package shim-signed) is missing" in said, said
        assert "grub-install --target" not in run.log     # refused before any grub went in
        again = vm.provision(_doc(srv, os_dir, False), ["--debug"])
        assert again.returncode == 0, again.log
        vm.stop()
    booted = make_vm(disk_images=list(vm.disk_images), boot="disk", firmware="uefi-secureboot")
    booted.wait_console(DENIED, timeout=REFUSED_WAIT)
    # the firmware went on to its other boot options: give the grub it refused time to show
    time.sleep(30)
    assert not re.search(MARKER, booted.console_text())
    booted.stop()
    # the same disk boots where Secure Boot is off: what stopped it was the signature check
    plain = make_vm(disk_images=list(vm.disk_images), boot="disk", firmware="uefi")
    assert plain.wait_console(MARKER, timeout=1800).group(2) == "0"
    plain.stop()
    vm.keep_disks = False

