"""The bootloader step on image trees laid out as RHEL-family and Debian images lay them out
(image_trees.py): the family read from the image, what the step says it will do, the commands
the fake runner records, and the files it leaves in the tree."""

import json
import os

import pytest

from provision_agent.drivers import bootloader, chroot, image_family
from provision_agent.drivers.secure_boot import SecureBootError
from provision_agent.errors import ImageError
from tests.unit.drivers import image_trees as trees
from tests.unit.fakes import FakeRunner

ROOT_UUID = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
BOOT_UUID = "99999999-8888-7777-6666-555555555555"
MD_UUID = "3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"


def runner(root, source="/dev/vda3", stack=None, lvs=""):
    """Answers as the ramdisk's findmnt/lsblk/lvs would for a target at root whose / is
    source and whose /boot is a directory of / (TARGET: the root itself)."""
    return FakeRunner({
        f"findmnt -n -o UUID --target {root}": ROOT_UUID,
        "findmnt -n -o UUID,TARGET --target": f"{ROOT_UUID} {root}",
        "findmnt -n -o TARGET --target": str(root),
        f"findmnt -n -o SOURCE --target {root}/boot/efi": "/dev/vda1",
        f"findmnt -n -o SOURCE --target {root}": source,
        "lsblk --json --inverse": json.dumps({"blockdevices": stack or [
            {"path": source, "type": "part", "fstype": "xfs", "uuid": ROOT_UUID}]}),
        "lvs --noheadings": lvs})


def inside(r):
    """The argv of each command run in the image (after the chroot helper), in order."""
    return [c[c.index(chroot.ENTER) + 2:] for c in r.calls if chroot.ENTER in c]


def efi(monkeypatch, booted=True):
    monkeypatch.setattr(bootloader.nvram, "efi_booted", lambda: booted)
    monkeypatch.setattr(bootloader, "esp_partitions",
                        lambda d: [("/dev/vda", "1")] if d == "/dev/vda1" else [])


@pytest.mark.parametrize("release,family", [
    ("rocky9", "rhel"), ("alma9", "rhel"), ("centos9", "rhel"), ("rhel9", "rhel"),
    ("alma8", "rhel")])
def test_the_family_is_read_from_os_release(tmp_path, release, family):
    trees.rhel(tmp_path, release)
    got = image_family.detect(str(tmp_path))
    assert got.name == family and "/etc/os-release ID=" in got.why


def test_debian_and_unknown_images_keep_debians_way(tmp_path):
    trees.debian(tmp_path / "deb")
    assert image_family.detect(str(tmp_path / "deb")).name == "debian"
    trees.tool(tmp_path / "other", "usr/sbin/grub2-mkconfig")
    # no os-release: grub2-mkconfig without grub-mkconfig is the RHEL family's sign
    assert image_family.detect(str(tmp_path / "other")).name == "rhel"
    trees.put(tmp_path / "like", "etc/os-release", 'ID=myos\nID_LIKE="rhel fedora"\n')
    assert image_family.detect(str(tmp_path / "like")).why.endswith("ID_LIKE=rhel fedora")


@pytest.mark.parametrize("release", ["rocky9", "alma9", "centos9", "rhel9"])
def test_uefi_goes_through_the_images_shim_without_grub_install(tmp_path, monkeypatch, release):
    layout = trees.rhel(tmp_path, release)
    efi(monkeypatch)
    r = runner(tmp_path)
    report = bootloader.install_report(r, str(tmp_path), {"boot_mode": "uefi",
                                                          "targets": ["/dev/vda"],
                                                          "kernel_params": "console=ttyS0"})
    vendor = layout["vendor"]
    assert report["plan"][1].startswith(
        f"grub2 (uefi) via the image's shim EFI/{vendor}/shimx64.efi")
    ran = inside(r)
    assert not [c for c in ran if c[0].startswith(("grub-install", "grub2-install"))]
    assert ["grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"] in ran
    assert [c for c in r.calls if c[0].startswith("grub")] == []     # nothing of the ramdisk's
    made = [c for c in r.calls if c[:2] == ["efibootmgr", "-q"] and "-c" in c]
    assert made == [["efibootmgr", "-q", "-c", "-d", "/dev/vda", "-p", "1", "-L", layout["name"],
                     "-l", f"\\EFI\\{vendor}\\shimx64.efi"]]
    # the stub finds this layout's /boot (here a directory of /) by its UUID
    stub = (tmp_path / f"boot/efi/EFI/{vendor}/grub.cfg").read_text()
    assert f"--fs-uuid --set=dev {ROOT_UUID}" in stub and trees.BUILDER_UUID not in stub
    assert "set prefix=($dev)/boot/grub2" in stub
    # the removable path was the image's own: nothing copied
    assert "the image's own with fbx64.efi" in report["plan"][2]


def test_the_bls_entry_gets_this_runs_command_line_and_boot_paths(tmp_path, monkeypatch):
    layout = trees.rhel(tmp_path, "rocky9")
    efi(monkeypatch, booted=False)
    report = bootloader.install_report(runner(tmp_path), str(tmp_path), {
        "boot_mode": "uefi", "targets": ["/dev/vda"], "kernel_params": "console=ttyS0 quiet"})
    entry = (tmp_path / layout["entry"]).read_text().splitlines()
    assert report["bls_options"] == {layout["entry"].rsplit("/", 1)[1]:
                                     f"root=UUID={ROOT_UUID} ro console=ttyS0 quiet $tuned_params"}
    kver = layout["kver"]
    # the builder's root and its volume group are gone; the image's tuned variable stays
    assert f"options root=UUID={ROOT_UUID} ro console=ttyS0 quiet $tuned_params" in entry
    # /boot is a directory of / in this layout: grub reads the kernel at /boot/...
    assert f"linux /boot/vmlinuz-{kver}" in entry
    assert f"initrd /boot/initramfs-{kver}.img $tuned_initrd" in entry
    assert f"title Rocky Linux ({kver}) 9.4" in entry        # the rest as the image has it
    assert (tmp_path / "etc/kernel/cmdline").read_text() == \
        f"root=UUID={ROOT_UUID} ro console=ttyS0 quiet\n"
    assert f"GRUB_CMDLINE_LINUX='root=UUID={ROOT_UUID} console=ttyS0 quiet'" in \
        (tmp_path / "etc/default/grub").read_text()


def test_a_missing_removable_path_is_copied_from_the_vendors_shim(tmp_path, monkeypatch):
    trees.rhel(tmp_path, "alma9", removable=False)
    efi(monkeypatch, booted=False)
    report = bootloader.install_report(runner(tmp_path), str(tmp_path),
                                       {"boot_mode": "uefi", "targets": ["/dev/vda"]})
    boot = tmp_path / "boot/efi/EFI/BOOT"
    assert (boot / "BOOTX64.EFI").read_bytes() == trees.SHIM_BYTES
    assert (boot / "grubx64.efi").read_bytes() == trees.GRUB_BYTES
    assert "EFI/BOOT/BOOTX64.EFI copied from EFI/almalinux/shimx64.efi" in report["plan"][2]


def test_rhel8_keeps_its_esp_config_and_kernelopts(tmp_path, monkeypatch):
    layout = trees.rhel(tmp_path, "alma8")
    efi(monkeypatch, booted=False)
    before = (tmp_path / layout["entry"]).read_text()
    r = runner(tmp_path)
    report = bootloader.install_report(r, str(tmp_path), {"boot_mode": "uefi",
                                                          "targets": ["/dev/vda"]})
    assert [c for c in inside(r) if c[0].startswith("grub2")] == [
        ["grub2-mkconfig", "-o", "/boot/efi/EFI/almalinux/grub.cfg"],
        ["grub2-editenv", "-", "set", f"kernelopts=root=UUID={ROOT_UUID} ro"]]
    assert "as RHEL 8 does" in report["plan"][3]
    # options $kernelopts: grubenv's, which grub2-mkconfig sets from GRUB_CMDLINE_LINUX
    assert "options $kernelopts $tuned_params" in (tmp_path / layout["entry"]).read_text()
    assert (tmp_path / layout["entry"]).read_text().replace("/boot/", "/") == before
    assert (tmp_path / "boot/efi/EFI/almalinux/grub.cfg").read_text().startswith("set timeout")


def test_bios_runs_the_images_grub2_install_on_every_disk(tmp_path, monkeypatch):
    trees.rhel(tmp_path, "rhel9")
    efi(monkeypatch)
    r = runner(tmp_path)
    report = bootloader.install_report(r, str(tmp_path), {"boot_mode": "bios",
                                                          "targets": ["/dev/sda", "/dev/sdb"]})
    ran = inside(r)
    assert [c for c in ran if c[0].startswith("grub")] == [
        ["grub2-install", "--target=i386-pc", "/dev/sda"],
        ["grub2-install", "--target=i386-pc", "/dev/sdb"],
        ["grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"]]
    assert not [c for c in r.calls if c[0] == "efibootmgr"]
    assert report["grub_cfg"] == "/boot/grub2/grub.cfg" and "efi_vendor" not in report


@pytest.mark.parametrize("mode,kwargs,needle", [
    ("uefi", {"esp": False}, "install shim-x64 and grub2-efi-x64"),
    ("bios", {"bios_tools": False}, "install grub2-pc")])
def test_what_the_image_lacks_is_named_before_any_command_in_it(tmp_path, mode, kwargs, needle):
    trees.rhel(tmp_path, "rocky9", **kwargs)
    r = runner(tmp_path)
    with pytest.raises(ImageError, match=needle):
        bootloader.install_report(r, str(tmp_path), {"boot_mode": mode,
                                                     "targets": ["/dev/vda"]})
    assert inside(r) == []


def test_secure_boot_refuses_an_unsigned_shim(tmp_path):
    trees.rhel(tmp_path, "rocky9")
    with pytest.raises(SecureBootError, match="EFI/rocky/shimx64.efi is not signed"):
        bootloader.install_report(runner(tmp_path), str(tmp_path), {
            "boot_mode": "uefi", "targets": ["/dev/vda"], "secure_boot": True})


def _raid_lvm_stack():
    member = {"type": "part", "fstype": "linux_raid_member", "uuid": MD_UUID}
    return [{"path": "/dev/mapper/vg0-root", "type": "lvm", "fstype": "xfs", "uuid": ROOT_UUID,
             "children": [{"path": "/dev/md127", "type": "raid1", "fstype": "LVM2_member",
                           "children": [dict(member, path="/dev/vda2"),
                                        dict(member, path="/dev/vdb2")]}]}]


def test_dracut_rebuilds_each_kernel_with_what_root_stands_on(tmp_path, monkeypatch):
    layout = trees.rhel(tmp_path, "rocky9")
    efi(monkeypatch, booted=False)
    r = runner(tmp_path, "/dev/mapper/vg0-root", _raid_lvm_stack(), lvs="  vg0/root\n")
    bootloader.install_report(r, str(tmp_path), {"boot_mode": "bios", "targets": ["/dev/vda"],
                                                 "initramfs": "rebuild"})
    assert [c for c in inside(r) if c[0] == "dracut"] == [
        ["dracut", "--force", "--add", "mdraid lvm", "--kver", layout["kver"]]]
    options = next(line for line in (tmp_path / layout["entry"]).read_text().splitlines()
                   if line.startswith("options"))
    assert options == (f"options root=UUID={ROOT_UUID} ro rd.lvm.lv=vg0/root "
                       f"rd.md.uuid={MD_UUID} $tuned_params")


def test_dracut_without_the_module_root_needs_is_refused_naming_the_package(tmp_path):
    trees.rhel(tmp_path, "rocky9", dracut_modules=("90mdraid",))
    r = runner(tmp_path, "/dev/mapper/vg0-root", _raid_lvm_stack(), lvs="  vg0/root\n")
    with pytest.raises(ImageError, match="no lvm module.*install lvm2"):
        bootloader.install_report(r, str(tmp_path), {"boot_mode": "bios",
                                                     "targets": ["/dev/vda"]})


def test_a_debian_image_runs_exactly_as_without_family_detection(tmp_path, monkeypatch):
    """The same commands, in the same order, with and without /etc/os-release naming Debian:
    the family detection adds nothing to a Debian image's run."""
    efi(monkeypatch)
    calls = []
    for name, os_release in (("with", True), ("without", False)):
        root = tmp_path / name
        trees.debian(root, os_release)
        r = runner(root)
        report = bootloader.install_report(r, str(root), {"boot_mode": "uefi",
                                                          "targets": ["/dev/vda"]})
        assert report["boot_mode"] == "uefi" and report["family"] == "debian"
        calls.append([[a.replace(str(root), "ROOT") for a in c] for c in r.calls])
    # grub-mkconfig runs beside the grub-installs: where it comes among them is the threads'
    mkconfig = [[c for c in run if "grub-mkconfig" in c] for run in calls]
    assert mkconfig[0] == mkconfig[1] and len(mkconfig[0]) == 1
    calls = [[c for c in run if "grub-mkconfig" not in c] for run in calls]
    assert calls[0] == calls[1]
    ran = [c[c.index(chroot.ENTER) + 2:] for c in calls[0] + mkconfig[0] if chroot.ENTER in c]
    assert [c[0] for c in ran] == ["update-initramfs", "grub-install", "grub-install",
                                   "grub-mkconfig"]
    assert ["grub-mkconfig", "-o", bootloader.PENDING_CFG] in ran
    assert (tmp_path / "with/boot/grub/grub.cfg").read_text() == "# by the fake grub-mkconfig\n"
    assert [c[-1] for c in calls[0] if c[0] == "efibootmgr" and "-c" in c] == [
        "\\EFI\\debian\\grubx64.efi"]


def test_a_separate_boot_gets_paths_and_a_stub_relative_to_itself(tmp_path, monkeypatch):
    """/boot a filesystem of its own: grub sees /vmlinuz-..., the stub's prefix is /grub2."""
    layout = trees.rhel(tmp_path, "rocky9")
    entry = tmp_path / layout["entry"]
    entry.write_text(entry.read_text().replace("linux /vmlinuz", "linux /boot/vmlinuz"))
    efi(monkeypatch, booted=False)
    r = runner(tmp_path)
    boot = str(tmp_path / "boot")
    r.answers.update({"findmnt -n -o UUID,TARGET --target": f"{BOOT_UUID} {boot}",
                      "findmnt -n -o TARGET --target": boot})
    bootloader.install_report(r, str(tmp_path), {"boot_mode": "uefi", "targets": ["/dev/vda"]})
    assert f"linux /vmlinuz-{layout['kver']}" in entry.read_text().splitlines()
    stub = (tmp_path / "boot/efi/EFI/rocky/grub.cfg").read_text()
    assert f"--set=dev {BOOT_UUID}\n" in stub and "set prefix=($dev)/grub2\n" in stub


def test_the_images_files_are_read_inside_it_and_bounded(tmp_path):
    root = tmp_path / "img"
    (root / "etc").mkdir(parents=True)
    outside = tmp_path / "os-release"
    outside.write_text("ID=rocky\n")
    # an absolute link resolves inside the image (where there is nothing), never to the host
    (root / "etc/os-release").symlink_to(str(outside))
    assert image_family.detect(str(root)).name == "debian"
    os.mkfifo(root / "etc/fifo")
    assert image_family.read_small(str(root), "/etc/fifo") == ""      # never opened to read
    trees.put(root, "usr/lib/os-release", "ID=almalinux\n" + "X=" + "y" * 200000 + "\n")
    assert image_family.read_small(str(root), "/usr/lib/os-release").__len__() == \
        image_family.MAX_FILE
