import threading

import pytest

from provision_agent.drivers import bootloader, chroot, initramfs, kernel_cmdline
from provision_agent.errors import ImageError
from provision_agent.run.runner import Result
from tests.unit.drivers.initramfs_files import MICROCODE, TOOLS
from tests.unit.drivers.initramfs_files import initramfs as make_initramfs
from tests.unit.fakes import act_like_grub_mkconfig


class FakeRunner:
    def __init__(self, fail_on=None):
        self.calls = []
        self.timeouts = []
        self.fail_on = fail_on

    def run(self, argv, **kw):
        argv = [str(a) for a in argv]
        self.calls.append(argv)
        self.timeouts.append(kw.get("timeout"))
        if self.fail_on and self.fail_on in argv:
            raise RuntimeError("boom")
        act_like_grub_mkconfig(argv)
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
    assert umounts == [str(tmp_path / n) for n in ("run", "sys", "dev")]


def test_chroot_unmounts_what_was_mounted_when_a_bind_fails(tmp_path):
    r = FakeRunner(fail_on=str(tmp_path / "sys"))
    with pytest.raises(RuntimeError):
        with chroot.bound(r, str(tmp_path)):
            pass
    assert [c[-1] for c in r.calls if c[0] == "umount"] == [str(tmp_path / "dev")]


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
    inside = r.calls[-1][r.calls[-1].index(chroot.ENTER):]
    assert inside[:3] == [chroot.ENTER, str(tmp_path), "dracut"]
    _exe(tmp_path, "usr/sbin/update-initramfs")
    initramfs.regenerate(ch)
    assert r.calls[-1][r.calls[-1].index(chroot.ENTER) + 2] == "update-initramfs"
    # longer than the runner's default: minutes per kernel on a slow machine
    assert r.timeouts[-2:] == [initramfs.REBUILD_TIMEOUT] * 2 and initramfs.REBUILD_TIMEOUT > 600


def test_cmdline_replaces_existing_and_sets_root_uuid(tmp_path):
    (tmp_path / "etc/default").mkdir(parents=True)
    (tmp_path / "etc/default/grub").write_text('GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="quiet"\n')
    kernel_cmdline.set_cmdline(str(tmp_path), "console=ttyS0 root=/dev/sda1", "abcd")
    text = (tmp_path / "etc/default/grub").read_text()
    assert "GRUB_CMDLINE_LINUX='root=UUID=abcd console=ttyS0'" in text
    assert "GRUB_TIMEOUT=5" in text and text.count("GRUB_CMDLINE_LINUX=") == 1


class MountRunner(FakeRunner):
    def __init__(self, source):
        super().__init__()
        self.source = source

    def run(self, argv, **kw):
        super().run(argv, **kw)
        return Result(tuple(argv), 0, self.source + "\n", "", 0.0)


def _sysfs_partition(tmp_path, disk, part, number):
    # /sys/class/block/vda2 -> devices/.../block/vda/vda2, as the kernel lays it out
    node = tmp_path / f"devices/pci0/block/{disk}/{part}"
    node.mkdir(parents=True)
    (node / "partition").write_text(f"{number}\n")
    (tmp_path / "class").mkdir(exist_ok=True)
    (tmp_path / "class" / part).symlink_to(node)


def test_esp_partition_read_from_sysfs(tmp_path):
    _sysfs_partition(tmp_path, "vda", "vda2", 2)
    assert bootloader.esp_partitions("/dev/vda2", str(tmp_path / "class")) == [("/dev/vda", "2")]
    assert bootloader.esp_partitions("", str(tmp_path / "class")) == []


def test_esp_on_md_resolves_to_its_member_partitions(tmp_path):
    _sysfs_partition(tmp_path, "vda", "vda1", 1)
    _sysfs_partition(tmp_path, "vdb", "vdb1", 1)
    (tmp_path / "class/md127/slaves").mkdir(parents=True)
    for m in ("vdb1", "vda1"):
        (tmp_path / "class/md127/slaves" / m).symlink_to(tmp_path / "class" / m)
    assert bootloader.esp_partitions("/dev/md127", str(tmp_path / "class")) == [
        ("/dev/vda", "1"), ("/dev/vdb", "1")]
    assert bootloader.esp_partitions("/dev/loop9", str(tmp_path / "class")) == []


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
    order = [c[c.index(chroot.ENTER) + 2] if chroot.ENTER in c else c[0] for c in r.calls]
    assert order.index("cp") > max(i for i, c in enumerate(order) if c.startswith("grub-"))
    assert ["umount", staging] in r.calls


def test_a_listed_second_esp_gets_the_esp_from_the_plans_own_step(tmp_path, monkeypatch):
    """curtin's mirrorboot-uefi (its second ESP formatted, not mounted): the plan's bootloader
    step copies the ESP onto it after grub-install (issue 56: nothing reached it)."""
    from provision_agent.data_drivers.native import NativeDriver
    from provision_agent.plan import pipeline
    from tests.unit.plan.test_esp_copies import DISKS, mirrorboot_uefi
    planned = pipeline.build_plan(NativeDriver(mirrorboot_uefi()).layout(), DISKS)
    (step,) = [s for s in planned.steps if s.kind == "bootloader"]
    _target_with_grub(tmp_path)
    monkeypatch.setattr(bootloader.nvram, "efi_booted", lambda: False)
    r = FakeRunner()
    assert bootloader.install(r, str(tmp_path), step.args) == "uefi"
    mounts = [c for c in r.calls if c[:3] == ["mount", "-t", "vfat"]]
    assert [m[3] for m in mounts] == ["/dev/vdb1"]
    assert [c for c in r.calls if c[0] == "cp"] == [
        ["cp", "-rL", f"{tmp_path}/boot/efi/.", mounts[0][4]]]


def test_nvram_entries_for_every_esp_with_the_primary_first_in_boot_order(monkeypatch):
    where = {"/dev/vda1": [("/dev/vda", "1")], "/dev/vdb1": [("/dev/vdb", "1")]}
    monkeypatch.setattr(bootloader, "esp_partitions", lambda d: where.get(d, []))
    r = MountRunner("/dev/vda1")
    bootloader._nvram_entries(r, "/t", ["/dev/vdb1"], "grubx64.efi")
    made = [(c[c.index("-d") + 1], c[c.index("-L") + 1]) for c in r.calls
            if c[0] == "efibootmgr" and "-c" in c]
    # efibootmgr -c puts each new entry first: the primary is created last
    assert made == [("/dev/vdb", "debian (/dev/vdb)"), ("/dev/vda", "debian")]


@pytest.mark.parametrize("choice,rebuilt", [("keep", False), ("rebuild", True), (None, True)])
def test_the_initramfs_is_rebuilt_unless_the_plan_keeps_the_images_own(tmp_path, choice,
                                                                        rebuilt):
    # a plan written before the choice existed (None) rebuilds, as every plan did then
    _target_with_grub(tmp_path)
    _exe(tmp_path, "boot/vmlinuz-6.1.0-9-amd64")
    _exe(tmp_path, "boot/initrd.img-6.1.0-9-amd64")
    r = FakeRunner()
    args = {"boot_mode": "bios", "targets": ["/dev/vda"]}
    if choice:
        args["initramfs"] = choice
    bootloader.install(r, str(tmp_path), args)
    tools = [c[c.index(chroot.ENTER) + 2] for c in r.calls if chroot.ENTER in c]
    assert ("update-initramfs" in tools) == rebuilt
    assert "grub-install" in tools and "grub-mkconfig" in tools


@pytest.mark.parametrize("files", [["boot/vmlinuz-6.1.0-9-amd64"], ["boot/config-6.1"],
                                   ["boot/vmlinuz-6.1.0-9-amd64", "boot/initrd.img-6.1.0-9-amd64",
                                    "boot/vmlinuz-6.1.0-10-amd64"]])
def test_kept_only_when_every_kernel_has_its_initramfs(tmp_path, files):
    # an image whose kernel has no initramfs (or with no kernel at all) gets one made: kept,
    # the kernel would not find its root
    _target_with_grub(tmp_path)
    for f in files:
        _exe(tmp_path, f)
    r = FakeRunner()
    bootloader.install(r, str(tmp_path), {"boot_mode": "bios", "targets": ["/dev/vda"],
                                          "initramfs": "keep"})
    tools = [c[c.index(chroot.ENTER) + 2] for c in r.calls if chroot.ENTER in c]
    assert "update-initramfs" in tools


@pytest.mark.parametrize("files,rebuilt", [
    (TOOLS, False),
    ({"usr/sbin/mdadm": b"x"}, True),
    (None, True)])
def test_on_md_and_lvm_kept_only_when_its_initramfs_carries_mdadm_and_lvm(tmp_path, files,
                                                                        rebuilt):
    # files None: an initramfs that cannot be read (not a cpio): rebuilt
    _target_with_grub(tmp_path)
    _exe(tmp_path, "boot/vmlinuz-6.1.0-9-amd64")
    initrd = tmp_path / "boot/initrd.img-6.1.0-9-amd64"
    if files is None:
        initrd.write_bytes(b"garbage")
    else:
        make_initramfs(tmp_path / "made", files, early=MICROCODE).rename(initrd)
    r = FakeRunner()
    bootloader.install(r, str(tmp_path), {"boot_mode": "bios", "targets": ["/dev/vda"],
                                          "initramfs": "keep",
                                          "initramfs_needs": ["mdadm", "lvm"]})
    tools = [c[c.index(chroot.ENTER) + 2] for c in r.calls if chroot.ENTER in c]
    assert ("update-initramfs" in tools) == rebuilt


def test_the_targets_grub_cfg_is_gone_until_the_step_writes_its_own_after_a_sync(tmp_path):
    """Issue 57: the image's own grub.cfg (or a kept /boot's old one) stayed while grub was
    installed, so a power cut before grub-mkconfig left a disk that booted by it; and nothing
    made sure the run's writes were on the disk before the configuration that boots them.
    grub-mkconfig now runs beside grub-install (issue 58): it writes a pending file, which
    becomes grub.cfg only after the installs' sync."""
    _target_with_grub(tmp_path)
    cfg = tmp_path / "boot/grub/grub.cfg"
    cfg.parent.mkdir(parents=True)
    cfg.write_text("menuentry 'the image's own' {}\n")
    (tmp_path / "boot/grub/grub.cfg.provision").write_text("an earlier run's, cut short\n")
    seen = []

    class Watching(FakeRunner):
        def run(self, argv, **kw):
            seen.append((" ".join(str(a) for a in argv), cfg.exists()))
            return super().run(argv, **kw)

    bootloader.install(Watching(), str(tmp_path), {"boot_mode": "bios", "targets": ["/dev/vda"],
                                                   "initramfs": "rebuild"})
    order = [c for c, _ in seen]
    grub = [i for i, c in enumerate(order) if "grub-install" in c or "update-initramfs" in c]
    mkconfig = next(i for i, c in enumerate(order) if "grub-mkconfig" in c)
    synced = order.index("sync")
    assert grub and synced > max(grub)
    # no grub.cfg from the first install to the sync, nor when grub-mkconfig starts
    assert not any(there for _, there in seen[min(grub):synced + 1] + [seen[mkconfig]])
    assert any(c.endswith("grub-mkconfig -o /boot/grub/grub.cfg.provision") for c in order)
    assert cfg.read_text() == "# by the fake grub-mkconfig\n"
    assert sorted(p.name for p in cfg.parent.iterdir()) == ["grub.cfg"]


def test_grub_mkconfig_runs_beside_grub_install_and_its_failure_fails_the_step(tmp_path):
    """Under emulation grub-mkconfig took 10-19 s and each grub-install 2.5-3 s, one after the
    other (issue 58). Here grub-install waits (5 s at most) for grub-mkconfig to start: one
    after the other it never does."""
    _target_with_grub(tmp_path)
    started = threading.Event()
    waited = []

    class Beside(FakeRunner):
        def run(self, argv, **kw):
            line = " ".join(str(a) for a in argv)
            if "grub-mkconfig" in line:
                started.set()
            elif "grub-install" in line:
                waited.append(started.wait(5))
            return super().run(argv, **kw)

    bootloader.install(Beside(), str(tmp_path), {"boot_mode": "bios", "initramfs": "rebuild",
                                                 "targets": ["/dev/vda", "/dev/vdb"]})
    assert waited == [True, True]
    assert (tmp_path / "boot/grub/grub.cfg").exists()
    (tmp_path / "boot/grub/grub.cfg").unlink()
    with pytest.raises(RuntimeError, match="boom"):
        bootloader.install(FakeRunner(fail_on="grub-mkconfig"), str(tmp_path),
                           {"boot_mode": "bios", "targets": ["/dev/vda"], "initramfs": "keep"})
    assert not (tmp_path / "boot/grub/grub.cfg").exists()
