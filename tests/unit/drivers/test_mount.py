from provision_agent.drivers import mount
from tests.unit.fakes import FakeRunner


def test_release_stale_unmounts_only_under_the_target_root_deepest_first(tmp_path):
    root = tmp_path / "target"
    info = tmp_path / "mountinfo"
    info.write_text(
        f"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
        f"2 1 8:2 / {root} rw - ext4 /dev/vda3 rw\n"
        f"3 2 8:3 / {root}/boot rw - ext2 /dev/vda2 rw\n"
        f"4 1 8:4 / {root}-other rw - ext2 /dev/vdb1 rw\n")
    r = FakeRunner()
    assert mount.release_stale(r, str(root), str(info)) == [str(root), f"{root}/boot"]
    assert r.lines() == [f"umount {root}/boot", f"umount {root}"]


def test_target_root_check_reads_the_machines_mounts(tmp_path):
    root = tmp_path / "target"
    root.mkdir()
    info = tmp_path / "mountinfo"
    info.write_text(f"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
                    f"2 1 0:5 / {root} rw - tmpfs tmpfs rw\n")
    import pytest

    from provision_agent.drivers import target
    with pytest.raises(target.TargetPathError, match="mount point of tmpfs"):
        mount.check_target_root(FakeRunner(), str(root), ["/dev/vda"], str(info))
    info.write_text(f"1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
                    f"2 1 8:2 / {root} rw - ext4 /dev/vda3 rw\n")
    lsblk = '{"blockdevices": [{"path": "/dev/vda3", "type": "part", "children": [' \
            '{"path": "/dev/vda", "type": "disk"}]}]}'
    assert mount.check_target_root(FakeRunner({"lsblk --json --inverse": lsblk}), str(root),
                                   ["/dev/vda"], str(info)) == str(root)
    with pytest.raises(target.TargetPathError, match="never / or a top-level"):
        mount.check_target_root(FakeRunner(), "/", ["/dev/vda"], str(info))


def test_an_umount_that_times_out_does_not_stop_the_others(tmp_path):
    """After a disk stalled under a tar image (VM, 2026-11-29) the clean-up's umount of /srv
    timed out: its CommandError ended umount_all, / stayed mounted and the timeout replaced
    the stall's message. Now the path is detached lazily and the next one unmounted."""
    from provision_agent.errors import CommandError

    class Slow(FakeRunner):
        def run(self, argv, check=True, **kwargs):
            if list(argv) == ["umount", "/t/srv"]:
                self.calls.append(list(argv))
                raise CommandError(list(argv), None, reason="timed out after 20s")
            return super().run(argv, check=check, **kwargs)

    runner = Slow()
    mounts = mount.Mounts(runner, "/t")
    mounts.stack = ["/t", "/t/srv"]
    assert mounts.umount_all() == []        # this machine's mounts: /t/srv is not among them
    assert runner.lines() == ["umount /t/srv", "umount --lazy /t/srv", "umount /t"]
    # still listed after --lazy: reported as not unmounted
    info = tmp_path / "mountinfo"
    info.write_text("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 254:2 / /t/srv rw - ext4 "
                    "/dev/vda2 rw\n")
    mounts.stack = ["/t", "/t/srv"]
    assert mounts.umount_all(str(info)) == ["/t/srv"]
