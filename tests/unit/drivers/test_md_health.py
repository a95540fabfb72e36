"""What md absorbed, read from sysfs."""

import time

import pytest

from provision_agent.drivers import md_health
from provision_agent.errors import CommandError
from provision_agent.run.runner import Result
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


class _BusyThenGone(FakeRunner):
    """mdadm --remove answers "busy" `busy` times (md still holds the member just failed)."""

    def __init__(self, busy, stderr="mdadm: hot remove failed for /dev/vdb2: Device or "
                 "resource busy\n"):
        super().__init__()
        self.busy, self.stderr = busy, stderr

    def run(self, argv, check=True, **kwargs):
        result = super().run(argv, check=check, **kwargs)
        if "--remove" in argv and self.busy:
            self.busy -= 1
            if check:
                raise CommandError(argv, 1, "", self.stderr)
            return Result(tuple(argv), 1, "", self.stderr, 0.0)
        return result


def test_remove_member_asks_again_while_md_still_holds_it():
    """In the VM (2026-11-29 15:23) mdadm --remove right after --fail said "Device or resource
    busy" and the run failed (exit 4) although the array's policy was degrade."""
    runner = _BusyThenGone(3)
    t0 = time.monotonic()
    md_health.remove_member(runner, "/dev/md/root", "/dev/vdb2")
    assert [c[3] for c in runner.calls] == ["--fail"] + ["--remove"] * 4
    assert 3 * md_health.REMOVE_TICK <= time.monotonic() - t0 < 10


def test_remove_member_gives_up_after_its_wait_or_on_another_error():
    clock = iter(range(0, 1000, 10)).__next__
    runner = _BusyThenGone(100)
    with pytest.raises(CommandError, match="resource busy"):
        md_health.remove_member(runner, "/dev/md/root", "/dev/vdb2", wait=30,
                                sleep=lambda s: None, clock=clock)
    assert len(runner.calls) == 1 + 3      # busy at 10 and 20 s on its clock, given up at 30
    runner = _BusyThenGone(1, stderr="mdadm: cannot remove: it is the last mirror\n")
    with pytest.raises(CommandError, match="last mirror"):
        md_health.remove_member(runner, "/dev/md/root", "/dev/vdb2", sleep=lambda s: None)
    assert len(runner.calls) == 2
