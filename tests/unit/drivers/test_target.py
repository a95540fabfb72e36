"""Nothing is written outside the target root, and the kernel command line survives the shell.
The outside files are real temporary files next to the root."""

import os
import subprocess

import pytest

from provision_agent.drivers import fstab, grub_config, kernel_cmdline, mount, target
from tests.unit.fakes import FakeRunner


@pytest.fixture
def image_root(tmp_path):
    """A target root whose image links its config files and /srv to absolute paths."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "etc/default").mkdir(parents=True)
    outside.mkdir()
    for name in ("fstab", "grub"):
        (outside / name).write_text(f"outside {name}\n")
    os.symlink(str(outside / "fstab"), root / "etc/fstab")
    os.symlink(str(outside / "grub"), root / "etc/default/grub")
    os.symlink("/", root / "srv")
    os.symlink("../../../..", root / "etc/up")
    return root, outside


def test_links_resolve_inside_the_root_as_a_chroot_would(image_root):
    root, outside = image_root
    assert target.resolve(root, "/etc/fstab") == f"{root}{outside}/fstab"
    assert target.resolve(root, "/srv/data") == f"{root}/data"
    assert target.resolve(root, "/etc/up/etc/passwd") == f"{root}/etc/passwd"
    assert target.resolve(root, "/../../etc") == f"{root}/etc"


def test_fstab_and_grub_defaults_are_written_inside_through_absolute_links(image_root):
    root, outside = image_root
    fstab.write(str(root), "UUID=1 / ext4 defaults 0 1\n")
    kernel_cmdline.set_cmdline(str(root), "quiet", "abcd")
    assert (outside / "fstab").read_text() == "outside fstab\n"
    assert (outside / "grub").read_text() == "outside grub\n"
    assert (root / str(outside).lstrip("/") / "fstab").read_text().startswith("UUID=1 /")
    assert "root=UUID=abcd quiet" in (root / str(outside).lstrip("/") / "grub").read_text()


def test_a_mount_point_under_a_link_to_slash_stays_inside(image_root):
    root, _ = image_root
    r = FakeRunner()
    where = mount.Mounts(r, str(root)).mount("/dev/vda3", "/srv/data", "ext4")
    assert where == f"{root}/data" and os.path.isdir(where)
    assert r.lines() == [f"mount -t ext4 /dev/vda3 {root}/data"]


def test_a_link_loop_is_refused(tmp_path):
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    with pytest.raises(target.TargetPathError, match="symbolic links"):
        target.resolve(tmp_path, "/a/x")


@pytest.mark.parametrize("make,refused", [
    (lambda tmp: "/", "never / or a top-level"),
    (lambda tmp: _link(tmp, "/"), "never / or a top-level"),
    (lambda tmp: "/tmp", "never / or a top-level"),
    (lambda tmp: _file(tmp), "not a directory"),
])
def test_a_dangerous_target_root_is_refused(tmp_path, make, refused):
    with pytest.raises(target.TargetPathError, match=refused):
        target.check_root(make(tmp_path), {}, lambda source: True)


def test_a_target_root_that_is_someone_elses_mount_point_is_refused(tmp_path):
    where = str(tmp_path / "mnt")
    os.mkdir(where)
    with pytest.raises(target.TargetPathError, match="mount point of /dev/sdz1"):
        target.check_root(where, {where: "/dev/sdz1"}, lambda source: False)
    # a root filesystem an interrupted run of this plan left there is ours to clean up
    assert target.check_root(where, {where: "/dev/os/root"}, lambda s: True) == where


def _link(tmp, to):
    os.symlink(to, tmp / "link")
    return str(tmp / "link")


def _file(tmp):
    (tmp / "file").write_text("")
    return str(tmp / "file")


@pytest.mark.parametrize("params,expected", [
    ('acpi_osi="!Windows 2015" quiet', 'root=UUID=u acpi_osi="!Windows 2015" quiet'),
    ('"; touch INJECTED; "', 'root=UUID=u "; touch INJECTED; "'),
    ("it's $(touch INJECTED) `touch INJECTED`", "root=UUID=u it's $(touch INJECTED) "
                                                "`touch INJECTED`"),
])
def test_grub_defaults_survive_the_shell_that_sources_them(tmp_path, params, expected):
    (tmp_path / "etc/default").mkdir(parents=True)
    (tmp_path / "etc/default/grub").write_text('GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="x"\n')
    kernel_cmdline.set_cmdline(str(tmp_path), params, "u")
    out = subprocess.run(["sh", "-c", '. ./etc/default/grub && printf %s "$GRUB_CMDLINE_LINUX"'],
                         cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout == expected
    assert not (tmp_path / "INJECTED").exists()


def test_grub_menu_title_cannot_end_its_quotes(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").write_text("PRETTY_NAME=\"Evil' ; reboot ; '\"\n")
    assert "'" not in grub_config._title(str(tmp_path))
