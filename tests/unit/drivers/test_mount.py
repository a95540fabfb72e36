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
