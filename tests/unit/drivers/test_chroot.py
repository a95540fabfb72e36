"""What the image's tools get of the ramdisk in the chroot: /dev and /sys, a /run of their own
with a copy of the udev database (never the ramdisk's /run, where the conductor's job files
live) and, per command, a PID namespace with a fresh /proc (never the ramdisk's, whose
/proc/1/root is the ramdisk's root). The runner is faked; tests/functional/test_chroot_reach.py
runs it for real."""

import os
import socket
import sys

from provision_agent.drivers import bootloader, chroot
from tests.unit.fakes import FakeRunner


def _udev_db(tmp_path):
    db = tmp_path / "udev"
    (db / "data").mkdir(parents=True)
    (db / "data" / "b252:0").write_text("E:ID_SERIAL=disk0\n")
    (db / "tags" / "systemd").mkdir(parents=True)
    (db / "tags" / "systemd" / "b252:0").write_text("")
    control = socket.socket(socket.AF_UNIX)
    control.bind(str(db / "control"))
    control.close()
    return db


def test_the_target_gets_dev_sys_and_a_run_of_its_own_never_the_ramdisks(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    r = FakeRunner()
    with chroot.bound(r, str(root), udev_db=str(_udev_db(tmp_path))):
        mounted = r.lines()
    assert mounted == [f"mount --bind /dev {root}/dev", f"mount --bind /sys {root}/sys",
                       f"mount -t tmpfs -o mode=755,nosuid,nodev tmpfs {root}/run"]
    assert not [line for line in r.lines() if "/proc" in line or "--bind /run" in line]
    copied = root / "run" / "udev"
    assert (copied / "data" / "b252:0").read_text() == "E:ID_SERIAL=disk0\n"
    assert (copied / "tags" / "systemd" / "b252:0").exists()
    assert not os.path.lexists(copied / "control")
    assert (root / "run" / "lock").is_dir() and (root / "proc").is_dir()


def test_every_command_in_the_target_runs_in_its_own_pid_namespace_and_proc(tmp_path):
    root = tmp_path / "root"
    for tool in ("usr/sbin/update-initramfs", "usr/sbin/grub-install", "usr/sbin/grub-mkconfig"):
        (root / tool).parent.mkdir(parents=True, exist_ok=True)
        (root / tool).write_text("")
        (root / tool).chmod(0o755)
    r = FakeRunner()
    bootloader.install(r, str(root), {"boot_mode": "bios", "targets": ["/dev/vda"]})
    inside = [c for c in r.calls if chroot.ENTER in c]
    # grub-mkconfig runs beside grub-install: their order is the threads'
    assert sorted(c[c.index(chroot.ENTER) + 2] for c in inside) == [
        "grub-install", "grub-mkconfig", "update-initramfs"]
    for argv in inside:
        # and a mount namespace of its own whose root is the target (enter_target.py)
        assert argv[:argv.index(chroot.ENTER) + 2] == [
            "unshare", "--mount", "--propagation", "private", "--pid", "--fork",
            "--kill-child", f"--mount-proc={root}/proc", sys.executable, "-I", chroot.ENTER,
            str(root)]


def test_udev_entries_that_vanish_while_they_are_copied_are_left_out(tmp_path, monkeypatch):
    # udev keeps working while the database is copied: its .lock files in links/ come and go
    # (a 512e VM run failed the bootloader step on one, shutil.Error ... .lock: No such file)
    db = _udev_db(tmp_path)
    gone_dir = db / "links" / "disk\\x2fby-uuid\\x2fabc"
    gone_dir.mkdir(parents=True)
    (gone_dir / ".lock").write_text("")
    (gone_dir / "b252:1").write_text("")
    (db / "data" / "b252:1").write_text("E:ID_SERIAL=disk1\n")
    real_scandir = os.scandir

    class Listing:
        """Lists a directory as it is, then udev takes entries away before they are copied."""

        def __init__(self, path):
            with real_scandir(path) as it:
                self.entries = list(it)
            for entry in self.entries:
                if entry.name in (".lock", "b252:1") or entry.path == str(gone_dir):
                    if entry.is_dir(follow_symlinks=False):
                        for child in os.listdir(entry.path):
                            os.remove(os.path.join(entry.path, child))
                        os.rmdir(entry.path)
                    elif os.path.lexists(entry.path):
                        os.remove(entry.path)

        def __enter__(self):
            return iter(self.entries)

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(os, "scandir", Listing)
    root = tmp_path / "root"
    root.mkdir()
    with chroot.bound(FakeRunner(), str(root), udev_db=str(db)):
        copied = root / "run" / "udev"
        assert (copied / "data" / "b252:0").read_text() == "E:ID_SERIAL=disk0\n"
        assert not os.path.lexists(copied / "data" / "b252:1")


def test_an_udev_entry_that_cannot_be_copied_for_another_reason_still_fails(tmp_path,
                                                                           monkeypatch):
    db = _udev_db(tmp_path)
    real_copy2 = chroot.shutil.copy2

    def refused(src, dst, **kw):
        if src.endswith("b252:0") and "/data/" in src:
            raise PermissionError(13, "Permission denied", dst)
        return real_copy2(src, dst, **kw)

    monkeypatch.setattr(chroot.shutil, "copy2", refused)
    root = tmp_path / "root"
    root.mkdir()
    try:
        with chroot.bound(FakeRunner(), str(root), udev_db=str(db)):
            pass
    except chroot.shutil.Error as e:
        assert "Permission denied" in str(e)
    else:
        raise AssertionError("a copy refused for another reason than a vanished source passed")
