"""What md absorbed, read from sysfs."""

from provision_agent.drivers import md_health
from tests.unit.fakes import FakeRunner


def fake_array(root, members, degraded="0", sync_action="idle"):
    md = root / "md127" / "md"
    for name, (state, errors, bad_blocks) in members.items():
        (md / f"dev-{name}").mkdir(parents=True)
        (md / f"dev-{name}" / "state").write_text(state + "\n")
        (md / f"dev-{name}" / "errors").write_text(f"{errors}\n")
        (md / f"dev-{name}" / "bad_blocks").write_text(bad_blocks)
    (md / "degraded").write_text(degraded + "\n")
    (md / "sync_action").write_text(sync_action + "\n")
    (md / "sync_completed").write_text("none\n")
    return root


# as md left the RAID1 of issue 57 after its resync met vdb's bad sector
RESYNC_BAD = "19840 512\n20352 512\n20864 512\n21376 512\n21888 512\n"


def test_parse_bad_blocks():
    assert md_health.parse_bad_blocks(RESYNC_BAD)[-1] == (21888, 512)
    assert md_health.parse_bad_blocks("") == []
    assert md_health.parse_bad_blocks("junk\n1 2 3\n7 8\n") == [(7, 8)]


def test_read_and_the_problems_md_absorbed(tmp_path):
    root = fake_array(tmp_path, {"vda1": ("in_sync", 0, ""),
                                 "vdb1": ("in_sync,write_error,want_replacement", 0, RESYNC_BAD)})
    health = md_health.read("/dev/md127", str(root))
    assert [m.name for m in health.members] == ["vda1", "vdb1"]
    assert health.degraded == 0 and health.sync_action == "idle"
    problems = md_health.member_problems(health)
    assert list(problems) == ["vdb1"]
    assert "md state in_sync,write_error,want_replacement" in problems["vdb1"]
    assert ("5 range(s) in its bad-block log (sector+count: 19840+512, 20352+512, 20864+512, "
            "21376+512 and 1 more)") in problems["vdb1"]


def test_corrected_read_errors_and_faulty_count_healthy_does_not(tmp_path):
    root = fake_array(tmp_path, {"sda2": ("in_sync", 3, ""), "sdb2": ("faulty", 0, ""),
                                 "sdc2": ("spare", 0, "")})
    problems = md_health.member_problems(md_health.read("/dev/md127", str(root)))
    assert problems == {"sda2": "3 read error(s) md corrected", "sdb2": "md state faulty"}
    assert md_health.read("/dev/md9", str(root)) is None


def test_remove_member_fails_then_removes():
    runner = FakeRunner()
    md_health.remove_member(runner, "/dev/md/root", "/dev/vdb1")
    assert runner.calls == [["mdadm", "--manage", "/dev/md/root", "--fail", "/dev/vdb1"],
                            ["mdadm", "--manage", "/dev/md/root", "--remove", "/dev/vdb1"]]
