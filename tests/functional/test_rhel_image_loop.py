"""The bootloader step and the /etc files on a RHEL-family root for real (root): an ext4 loop
device holding a Rocky 9 tree as its packages lay it out (tests/unit/drivers/image_trees.py),
its ESP a directory of it (this host's kernel has no vfat), the image's tools stand-ins
(grub2-mkconfig and dracut as shell scripts that record what they were asked; the host's /usr
under them through an overlay, so /bin/sh runs in the target), run through the real chroot
helper. What is read back: the BLS entry's options and paths, /etc/kernel/cmdline, the ESP's
stub grub.cfg and removable path, what dracut and grub2-mkconfig were given, mdadm.conf's
place and /.autorelabel. No RHEL-family image boots here (only Debian's packages are
reachable): this proves the files, not the boot."""

import os
import subprocess
from types import SimpleNamespace

import pytest

from provision_agent.drivers import bootloader
from provision_agent.plan.steps import make as Step
from provision_agent.run.runner import Runner
from provision_agent.run.target_files import TargetFiles
from tests.functional.prereq import require, sh
from tests.unit.drivers import image_trees as trees

pytestmark = require("losetup", "mkfs.ext4", "mount", "unshare", "findmnt",
                     "lsblk", "blkid")

MKCONFIG = '#!/bin/sh\n[ "$1" = -o ] || exit 2\nprintf "# grub2-mkconfig stand-in\\n" > "$2"\n'
DRACUT = '#!/bin/sh\necho "$@" >> /boot/dracut-calls\n'


@pytest.fixture
def rocky(tmp_path, loop):
    root_dev = loop(256 << 20)
    sh("mkfs.ext4", "-q", root_dev)
    stage, root = tmp_path / "stage", tmp_path / "root"
    layout = trees.rhel(stage, "rocky9", removable=False)
    trees.put(stage, "usr/sbin/grub2-mkconfig", MKCONFIG, 0o755)
    trees.put(stage, "usr/bin/dracut", DRACUT, 0o755)
    root.mkdir()
    mounted = []
    try:
        sh("mount", root_dev, str(root))
        mounted.append(root)
        # the tree but /usr: the host's /usr under the image's own files (overlay), so the
        # stand-ins' /bin/sh is there
        for name in os.listdir(stage):
            if name != "usr":
                subprocess.run(["cp", "-a", str(stage / name), str(root)], check=True)
        for name in ("lib", "lib64"):
            if os.path.islink(f"/{name}"):
                os.symlink(os.readlink(f"/{name}"), root / name)
        (root / "usr").mkdir()
        work = tmp_path / "work"
        work.mkdir()
        sh("mount", "-t", "overlay", "overlay", "-o",
           f"lowerdir=/usr,upperdir={stage / 'usr'},workdir={work}", str(root / "usr"))
        mounted.append(root / "usr")
        yield root, root_dev, layout
    finally:
        for where in reversed(mounted):
            subprocess.run(["umount", "--lazy", str(where)], check=False)


def test_a_rocky_root_gets_its_entries_stub_removable_path_and_etc_files(rocky):
    root, root_dev, layout = rocky
    runner = Runner()
    uuid = sh("blkid", "-s", "UUID", "-o", "value", root_dev).strip()
    report = bootloader.install_report(runner, str(root), {
        "boot_mode": "uefi", "targets": [root_dev], "kernel_params": "console=ttyS0",
        "initramfs": "rebuild"})
    kver = layout["kver"]
    entry = (root / layout["entry"]).read_text().splitlines()
    assert f"options root=UUID={uuid} ro console=ttyS0 $tuned_params" in entry
    assert f"linux /boot/vmlinuz-{kver}" in entry          # /boot is a directory of / here
    assert (root / "etc/kernel/cmdline").read_text() == f"root=UUID={uuid} ro console=ttyS0\n"
    # the image's tools ran in the target, as asked
    assert (root / "boot/dracut-calls").read_text() == f"--force --kver {kver}\n"
    assert (root / "boot/grub2/grub.cfg").read_text() == "# grub2-mkconfig stand-in\n"
    stub = (root / "boot/efi/EFI/rocky/grub.cfg").read_text()
    assert f"--fs-uuid --set=dev {uuid}\n" in stub and "set prefix=($dev)/boot/grub2" in stub
    # the removable path the ESP lacked, copied from the vendor's shim and grub
    assert (root / "boot/efi/EFI/BOOT/BOOTX64.EFI").read_bytes() == trees.SHIM_BYTES
    assert (root / "boot/efi/EFI/BOOT/grubx64.efi").read_bytes() == trees.GRUB_BYTES
    assert report["efi_vendor"] == "rocky" and report["grub_cfg"] == "/boot/grub2/grub.cfg"
    files = TargetFiles(runner, str(root), SimpleNamespace(stack=[str(root)]))
    files.mdadm_conf(Step("mdadm_conf", {"arrays": []}))
    files.fstab(Step("fstab", {"entries": [{"device": root_dev, "mount_point": "/",
                                            "fs_type": "ext4", "options": "defaults",
                                            "dump": 0, "pass": 1}]}))
    assert (root / "etc/mdadm.conf").read_text().startswith("# written by provision-agent")
    assert not (root / "etc/mdadm").exists()
    assert (root / ".autorelabel").exists()
    assert f"UUID={uuid}\t/\text4" in (root / "etc/fstab").read_text()
