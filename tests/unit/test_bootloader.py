import pytest

from provision_agent.drivers import bootloader, chroot, initramfs, kernel_cmdline
from provision_agent.errors import ImageError
from provision_agent.runner import Result


class FakeRunner:
    def __init__(self, fail_on=None):
        self.calls = []
        self.fail_on = fail_on

    def run(self, argv, **kw):
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        if self.fail_on and self.fail_on in argv:
            raise RuntimeError("boom")
        return Result(tuple(argv), 0, "", "", 0.0)


def test_bios_installs_on_every_target():
    cmds = bootloader.install_commands("bios", ["/dev/sda", "/dev/sdb"], "/mnt", True)
    assert cmds == [["grub-install", "--target=i386-pc", "/dev/sda"],
                    ["grub-install", "--target=i386-pc", "/dev/sdb"]]


def test_uefi_has_removable_fallback_and_ramdisk_paths():
    cmds = bootloader.install_commands("uefi", ["/dev/sda"], "/mnt", False)
    assert any("--removable" in c for c in cmds)
    assert all("--efi-directory=/mnt/boot/efi" in c for c in cmds)
    assert all("--boot-directory=/mnt/boot" in c for c in cmds)


def test_boot_mode_detection(tmp_path):
    assert bootloader.boot_mode("bios") == "bios"
    assert bootloader.boot_mode("auto", str(tmp_path / "missing")) == "bios"
    assert bootloader.boot_mode("auto", str(tmp_path)) == "uefi"


def test_chroot_unmounts_on_failure(tmp_path):
    r = FakeRunner()
    with pytest.raises(ValueError):
        with chroot.bound(r, str(tmp_path)):
            raise ValueError("x")
    umounts = [c[-1] for c in r.calls if c[0] == "umount"]
    assert umounts == [str(tmp_path / n) for n in reversed(chroot.BINDS)]


def test_chroot_unmounts_what_was_mounted_when_a_bind_fails(tmp_path):
    r = FakeRunner(fail_on=str(tmp_path / "sys"))
    with pytest.raises(RuntimeError):
        with chroot.bound(r, str(tmp_path)):
            pass
    assert [c[-1] for c in r.calls if c[0] == "umount"] == [str(tmp_path / "proc"),
                                                            str(tmp_path / "dev")]


def _exe(root, rel):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("")
    p.chmod(0o755)


def test_initramfs_tool_detected(tmp_path):
    r = FakeRunner()
    ch = chroot.Chroot(r, str(tmp_path))
    with pytest.raises(ImageError):
        initramfs.regenerate(ch)
    _exe(tmp_path, "usr/bin/dracut")
    initramfs.regenerate(ch)
    assert r.calls[-1][:3] == ["chroot", str(tmp_path), "dracut"]
    _exe(tmp_path, "usr/sbin/update-initramfs")
    initramfs.regenerate(ch)
    assert r.calls[-1][2] == "update-initramfs"


def test_cmdline_replaces_existing_and_sets_root_uuid(tmp_path):
    (tmp_path / "etc/default").mkdir(parents=True)
    (tmp_path / "etc/default/grub").write_text('GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="quiet"\n')
    kernel_cmdline.set_cmdline(str(tmp_path), "console=ttyS0 root=/dev/sda1", "abcd")
    text = (tmp_path / "etc/default/grub").read_text()
    assert 'GRUB_CMDLINE_LINUX="root=UUID=abcd console=ttyS0"' in text
    assert "GRUB_TIMEOUT=5" in text and text.count("GRUB_CMDLINE_LINUX=") == 1


class MountRunner(FakeRunner):
    def __init__(self, source):
        super().__init__()
        self.source = source

    def run(self, argv, **kw):
        super().run(argv, **kw)
        return Result(tuple(argv), 0, self.source + "\n", "", 0.0)


def test_partition_location_reads_disk_and_number_from_sysfs(tmp_path):
    # /sys/class/block/vda2 -> devices/.../block/vda/vda2, as the kernel lays it out
    part = tmp_path / "devices/pci0/block/vda/vda2"
    part.mkdir(parents=True)
    (part / "partition").write_text("2\n")
    (tmp_path / "class").mkdir()
    (tmp_path / "class/vda2").symlink_to(part)
    assert bootloader.partition_location("/dev/vda2", str(tmp_path / "class")) == ("/dev/vda", "2")


def test_esp_on_md_has_no_nvram_location(tmp_path):
    (tmp_path / "md127").mkdir()
    assert bootloader.partition_location("/dev/md127", str(tmp_path)) is None
    assert bootloader.partition_location("", str(tmp_path)) is None


def _target_with_grub(root):
    for tool in ("usr/sbin/update-initramfs", "usr/sbin/grub-install", "usr/sbin/grub-mkconfig"):
        _exe(root, tool)
    (root / "boot/efi/EFI/debian").mkdir(parents=True)


@pytest.mark.parametrize("mode", ["uefi", "bios"])
def test_esp_copies_get_the_esp_in_uefi_mode_only(tmp_path, mode):
    _target_with_grub(tmp_path)
    r = FakeRunner()
    got = bootloader.install(r, str(tmp_path), {"boot_mode": mode, "targets": ["/dev/vda",
                                                "/dev/vdb"], "esp_copies": ["/dev/vdb1"]})
    assert got == mode
    copies = [c for c in r.calls if c[0] == "cp"]
    mounts = [c for c in r.calls if c[:3] == ["mount", "-t", "vfat"]]
    if mode == "bios":
        assert copies == [] and mounts == []
        return
    # mounted, copied from the target's ESP, unmounted again — after grub wrote the ESP
    assert mounts and mounts[0][3] == "/dev/vdb1"
    staging = mounts[0][4]
    assert copies == [["cp", "-rL", f"{tmp_path}/boot/efi/.", staging]]
    order = [c[0] if c[0] != "chroot" else c[2] for c in r.calls]
    assert order.index("cp") > max(i for i, c in enumerate(order) if c.startswith("grub-"))
    assert ["umount", staging] in r.calls
