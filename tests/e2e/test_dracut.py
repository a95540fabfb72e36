"""Images whose initramfs is dracut's (issue 61): the test OS built with dracut in place of
initramfs-tools (`tests/images/build-debian.sh dracut`), provisioned from its tar, so the image's
own dracut rebuilds the initramfs with the modules the layout needs and the kernel command line
carries dracut's rd.md.uuid / rd.lvm.lv / rd.luks.uuid for what / stands on; then the disks
booted on their own to the test OS's marker:

- RAID1 + LVM root (samples/two-disk-raid-lvm.json), booted with the first disk removed;
- RAID1 + LUKS2 (TPM2, clevis-dracut) + LVM root (samples/encrypted-raid1-lvm.json), booted
  with its own TPM.

Outside CI (two provisions and boots, each with a dracut run under TCG): tox -e e2e-dracut.
"""

import json
import re

import pytest

from tests.vmbench import FileServer, agekeys, testos
from tests.vmbench.ramdisk import REPO_ROOT
from tests.vmbench.tpm import SoftTPM

pytestmark = pytest.mark.dracut

SAMPLES = REPO_ROOT / "samples"
MARKER = r"PROVISION-BOOT-OK cd=\S+ mpath=\S+ root=(\S+)"


@pytest.fixture(scope="module")
def dracut_os():
    return testos.build_dir("dracut")


def _doc(sample, srv, os_dir):
    doc = json.loads((SAMPLES / sample).read_text())
    tar = os_dir / "root.tar.zst"
    doc["images"] = [{"uri": srv.guest_url(tar.name), "format": "tar", "target": "/",
                      "checksum": testos.checksum(tar)}]
    doc.setdefault("bootloader", {})["kernel_params"] = "console=ttyS0"
    return doc


def _provision(make_vm, doc, tpm=None, args=()):
    vm = make_vm(disks=2, disk_size="4G", keep_disks=True, tpm=tpm,
                 serials=["disk0", "disk1"])
    run = vm.provision(doc, ["--debug", *args])
    assert run.returncode == 0, run.log
    cmdline = vm.ssh("mount /dev/os/root /mnt && cat /mnt/etc/kernel/cmdline "
                     "/mnt/etc/default/grub 2>/dev/null; umount /mnt", check=False).stdout
    vm.stop()
    return vm, run.log, cmdline


def _dracut_ran(log):
    runs = [line for line in log.splitlines() if "run:" in line and "dracut" in line]
    assert runs and all("--force" in line for line in runs), runs or log[-3000:]
    return " ".join(runs)


def test_raid1_lvm_root_boots_through_the_images_dracut_with_disk_0_removed(make_vm, dracut_os):
    with FileServer(dracut_os) as srv:
        prov, log, cmdline = _provision(make_vm, _doc("two-disk-raid-lvm.json", srv, dracut_os))
    ran = _dracut_ran(log)
    assert "mdraid" in ran and "lvm" in ran, ran
    assert re.search(r"rd\.md\.uuid=\S+", cmdline) and "rd.lvm.lv=os/root" in cmdline, cmdline
    booted = make_vm(disk_images=list(prov.disk_images)[1:], boot="disk")
    root = booted.wait_console(MARKER, timeout=1800).group(1)
    assert ":lvm" in root and ":raid1" in root, root
    prov.keep_disks = False


def test_tpm2_luks2_raid1_lvm_root_boots_through_the_images_dracut(make_vm, dracut_os, tmp_path):
    (tmp_path / "age").mkdir()
    _identity, recipient = agekeys.keypair(tmp_path / "age")
    tpm_state = tmp_path / "tpm"
    with FileServer(dracut_os) as srv:
        doc = _doc("encrypted-raid1-lvm.json", srv, dracut_os)
        doc["recovery"] = {"age_recipients": [recipient]}
        prov, log, cmdline = _provision(make_vm, doc, tpm=SoftTPM(tpm_state),
                                        args=["--recovery_key_file", "/tmp/recovery.json"])
    ran = _dracut_ran(log)
    assert "crypt" in ran and "mdraid" in ran and "lvm" in ran, ran
    assert "rd.luks.uuid=" in cmdline, cmdline
    booted = make_vm(disk_images=list(prov.disk_images), boot="disk", tpm=SoftTPM(tpm_state))
    root = booted.wait_console(MARKER, timeout=1800).group(1)
    assert ":crypt" in root and ":raid1" in root, root
    prov.keep_disks = False
