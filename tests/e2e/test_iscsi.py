"""iSCSI disks as install targets, proven in the VM bench (issue 56): Debian's tgt on the host
(tests/vmbench/iscsi_target.py) serves a LUN with CHAP; the VM reaches it as 10.0.2.2.

- A wrong CHAP secret: exit 3 naming the target and the portal, the secret in no output, and
  nothing written to the VM's local disk or to the LUN.
- `/` on the LUN, /boot and grub on the VM's local disk: provisioned in the ramdisk (the
  ramdisk's iscsiadm logs in before discovery), the LUN's partition table and ext4 read back
  from the host, the secret in no output; then the installed system boots from its local disk,
  its initramfs logs in to the target (`/etc/iscsi/iscsi.initramfs`, `ip=` on the kernel
  command line) and mounts `/` from the LUN: the boot marker's root chain is the iSCSI disk,
  and tgt shows the installed system's session.

Outside CI (`tox -e e2e-iscsi`, marker `iscsi`); its runs are in docs/testing.md.
"""

import re
import secrets
import shutil

import pytest

from tests.vmbench import VM, FileServer, images, testos
from tests.vmbench.iscsi_target import IQN, IscsiTarget

pytestmark = pytest.mark.iscsi

MARKER = r"PROVISION-BOOT-OK cd=\S+ mpath=\S+ root=(\S+)"
USER = "node1"
GiB = 1 << 30


def test_the_ramdisk_carries_the_initiator(ramdisk):
    """Read from the built initramfs, no boot: open-iscsi's tools, the iscsi_tcp module, and no
    initiator name baked in (every machine would log in under it)."""
    listing = ramdisk.base_paths()
    for tool in ("usr/sbin/iscsiadm", "usr/sbin/iscsid", "usr/sbin/iscsi-iname"):
        assert tool in listing, tool
    assert any(p.endswith("/kernel/drivers/scsi/iscsi_tcp.ko") for p in listing)
    assert "etc/iscsi/initiatorname.iscsi" not in listing


def _layout(portal, password, srv, tar):
    return {
        "version": 1,
        "disks": [
            {"id": "local", "match": {"name": "/dev/vda"}, "partitions": [
                {"id": "bios", "size": "1MiB", "type": "bios_grub"},
                {"id": "boot", "size": "512MiB"}]},
            {"id": "san", "iscsi": {"portal": portal, "target": IQN, "lun": 1,
                                    "chap": {"username": USER, "password": password}},
             "partitions": [{"id": "root", "size": "remaining"}]}],
        "filesystems": [{"device": "root", "type": "ext4", "mount": "/", "label": "root"},
                        {"device": "boot", "type": "ext2", "mount": "/boot", "label": "boot"}],
        "images": [{"uri": srv.guest_url(tar.name), "format": "tar", "target": "/",
                    "checksum": testos.checksum(tar)}],
        "bootloader": {"boot_mode": "bios", "kernel_params": "console=ttyS0"},
    }


def test_root_on_an_iscsi_lun_boots(ramdisk, tmp_path):
    secret = "chap-" + secrets.token_hex(8)
    tar = testos.iscsi_tar_zst()
    with IscsiTarget(tmp_path / "target", {1: 6 * GiB}, chap=(USER, secret)) as tgt, \
            FileServer(tar.parent) as srv:
        with VM(disks=["2G"], name="iscsi", ramdisk=ramdisk, keep_disks=True) as vm:
            wrong = vm.provision(_layout(tgt.guest_portal, "not-" + secret, srv, tar),
                                 ["--debug"])
            assert wrong.returncode == 3, wrong.log
            assert f"iSCSI target {IQN} at {tgt.guest_portal}: cannot log in" in wrong.stderr
            assert images.partition_table(vm.disk_images[0]) is None    # nothing written
            assert images.partition_table(tgt.lun_path(1)) is None

            run = vm.provision(_layout(tgt.guest_portal, secret, srv, tar), ["--debug"])
            assert run.returncode == 0, run.log
            for shown in (run.log, run.stdout, run.stderr, wrong.log, wrong.stderr,
                          vm.console_text()):
                assert secret not in shown
            assert tgt.show()["initiators"], "no session from the ramdisk"
            # a record made with `iscsiadm -o new` (no discovery, no TPGT) is a file per
            # portal, nodes/TARGET/ADDRESS,PORT; after discovery, a directory of interfaces
            records = vm.ssh("mount /dev/disk/by-label/root /mnt && "
                             "cat /mnt/etc/iscsi/iscsi.initramfs /mnt/etc/fstab && "
                             "find /mnt/etc/iscsi/nodes -type f -exec cat {} +; "
                             "umount /mnt").stdout
            assert f"ISCSI_TARGET_NAME={IQN}" in records and "node.startup = automatic" in records
            vm.stop()
        # read back from the host: the LUN holds the plan's table and the root filesystem
        table = images.partition_table(tgt.lun_path(1))
        assert table and len(table["partitions"]) == 1, table
        start = table["partitions"][0]["start"] * 512
        assert images.probe(tgt.lun_path(1), start).get("LABEL") == "root"

        with VM(disk_images=vm.disk_images, boot="disk", name="iscsi-boot",
                ramdisk=ramdisk) as booted:
            m = booted.wait_console(MARKER, timeout=1800)
            console = booted.console_text()
            sessions = tgt.show()["initiators"]
        shutil.rmtree(vm.workdir, ignore_errors=True)
    chain = m.group(1).split(",")
    assert re.fullmatch(r"sd[a-z]+1:part", chain[0]) and chain[1].endswith(":disk"), chain
    assert sessions, "the installed system holds no session to the target"
    assert secret not in console
