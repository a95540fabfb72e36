"""Images whose initramfs is dracut's (issue 61): the test OS built with dracut in place of
initramfs-tools (`tests/images/build-debian.sh dracut`), provisioned from its tar, so the image's
own dracut rebuilds the initramfs with the modules the layout needs and the kernel command line
carries dracut's rd.md.uuid / rd.lvm.lv / rd.luks.uuid for what / stands on; then the disks
booted on their own to the test OS's marker:

- RAID1 + LVM root (samples/two-disk-raid-lvm.json), booted with the first disk removed;
- RAID1 + LUKS2 (TPM2, clevis-dracut) + LVM root (samples/encrypted-raid1-lvm.json), booted
  with its own TPM;
- LVM root on a multipath disk (one image behind two SCSI paths on two HBAs), booted through one
  path only: dracut's multipath module, with the WWID provision wrote in /etc/multipath/wwids,
  makes the map from the one path left (test_multipath.py does it with initramfs-tools).

Outside CI (three provisions and boots, each with a dracut run under TCG): tox -e e2e-dracut.
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
    """sample: a file of samples/ or a layout; the test OS's tar as the image of /."""
    doc = json.loads((SAMPLES / sample).read_text()) if isinstance(sample, str) else sample
    tar = os_dir / "root.tar.zst"
    doc["images"] = [{"uri": srv.guest_url(tar.name), "format": "tar", "target": "/",
                      "checksum": testos.checksum(tar)}]
    doc.setdefault("bootloader", {})["kernel_params"] = "console=ttyS0"
    return doc


def _provision(make_vm, doc, tpm=None, args=(), **disks):
    """doc: the document, or a function of the VM that returns it (what it must name)."""
    disks = disks or {"disks": 2, "serials": ["disk0", "disk1"]}
    vm = make_vm(disk_size="4G", keep_disks=True, tpm=tpm, **disks)
    run = vm.provision(doc(vm) if callable(doc) else doc, ["--debug", *args])
    assert run.returncode == 0, run.log
    cmdline = vm.ssh("mount /dev/os/root /mnt && cat /mnt/etc/kernel/cmdline "
                     "/mnt/etc/default/grub /mnt/etc/multipath/wwids 2>/dev/null; umount /mnt",
                     check=False).stdout
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


def _multipath_doc(vm, srv, os_dir):
    """LVM root on the VM's multipath disk, named by the by-path link of one of its paths
    (a root device hint written for a path, as tests/e2e/test_multipath.py names it)."""
    (disk,) = [d for d in vm.inventory()["inventory"]["disks"] if d.get("multipath")]
    return _doc({
        "version": 1,
        "disks": [{"id": "mp", "match": {"by_path": disk["multipath"]["paths"][0]["by_path"]},
                   "partitions": [
            {"id": "bios", "size": "1MiB", "type": "bios_grub"},
            {"id": "os", "size": "remaining", "type": "lvm"}]}],
        "volume_groups": [{"id": "vg-os", "name": "os", "pvs": ["os"], "logical_volumes": [
            {"id": "lv-root", "name": "root", "size": "remaining"}]}],
        "filesystems": [{"device": "lv-root", "type": "ext4", "mount": "/", "label": "root"}],
        "bootloader": {"boot_mode": "bios"}}, srv, os_dir)


def test_lvm_root_on_multipath_boots_through_the_images_dracut_with_one_path(make_vm, dracut_os):
    with FileServer(dracut_os) as srv:
        prov, log, written = _provision(make_vm, lambda vm: _multipath_doc(vm, srv, dracut_os),
                                        disks=1, bus=["multipath"], serials=["mpath0"])
    ran = _dracut_ran(log)
    assert "multipath" in ran and "lvm" in ran, ran
    # multipathd.socket masked in the initramfs (drivers/dracut.py: else no switch root)
    assert "--include /run/provision-agent-dracut/units /etc/systemd/system" in ran, ran
    assert "rd.lvm.lv=os/root" in written, written
    assert re.search(r"^/\S+/$", written, re.M), f"no WWID in /etc/multipath/wwids: {written}"
    # the disk image alone, behind one SCSI path (the second HBA's is gone)
    booted = make_vm(disk_images=list(prov.disk_images), bus=["scsi"], serials=["mpath0"],
                     boot="disk")
    m = booted.wait_console(MARKER, timeout=1800)
    console = booted.console_text()
    print(f"\ndracut multipath: marker {m.group(0)}")
    chain = m.group(1).split(",")
    assert chain[0].endswith(":lvm") and any(c.endswith(":mpath") for c in chain), chain
    assert "mpath=none" not in m.group(0), m.group(0)
    assert re.search(r"dracut-\d+\S* \(Initramfs\)", console), "not dracut's initramfs"
    prov.keep_disks = False
