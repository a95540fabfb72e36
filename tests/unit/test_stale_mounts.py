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
