"""A disk that stops answering (issue 57): the watch over the kernel's counters finds it, the
run's running command and image writes stop waiting, and the failure names the step and the
disk. Time is the tests' own clock; the writes that never end are threads on an Event."""

import threading
import time
from types import SimpleNamespace

import pytest

from provision_agent.drivers.images import blockwrite
from provision_agent.errors import CommandError, DiskGone, DiskStalled
from provision_agent.plan.steps import make as Step
from provision_agent.run import apply, disk_watch
from provision_agent.run.events import Events
from provision_agent.run.executor import Executor
from provision_agent.run.runner import Runner
from tests.unit.fakes import FakeRunner


def stat(done, in_flight):
    """A /sys/block/X/stat line's fields: `done` writes completed, `in_flight` in flight."""
    return [0, 0, 0, 0, done, 0, 0, 0, in_flight, 0, 0, 0, 0, 0, 0, 0, 0]


class Disks:
    def __init__(self, **fields):
        self.fields, self.now = fields, 0.0

    def read(self, name):
        return self.fields.get(name)

    def watch(self, seconds=30):
        return disk_watch.DiskWatch(list(self.fields), seconds, None, read=self.read,
                                    clock=lambda: self.now)


def test_requests_in_flight_with_none_finished_for_the_deadline_is_a_stall():
    disks = Disks(vda=stat(100, 0), vdb=stat(50, 2))
    watch = disks.watch(30)
    assert watch.check() is None
    for t in (10, 20, 29):
        disks.now = t
        disks.fields["vda"] = stat(100 + t * 1000, 4)     # busy and moving: never a stall
        assert watch.check() is None
    disks.now = 30
    assert watch.check() == ("vdb", 2)


def test_an_idle_disk_and_a_slow_one_that_moves_are_not_stalled():
    disks = Disks(vda=stat(7, 0), vdb=stat(0, 1))
    watch = disks.watch(30)
    for t in range(0, 300, 10):
        disks.now = t
        disks.fields["vdb"] = stat(t // 20, 1)     # a request finished every 20 s
        assert watch.check() is None
    disks.fields["gone"] = None                   # unplugged: look_gone() tells
    assert watch.check() is None


def test_the_stall_clock_starts_when_requests_are_first_seen_waiting():
    disks = Disks(vda=stat(5, 0))
    watch = disks.watch(30)
    watch.check()
    disks.now, disks.fields["vda"] = 100, stat(5, 1)    # idle 100 s, then one waits
    assert watch.check() is None
    disks.now = 129
    assert watch.check() is None
    disks.now = 130
    assert watch.check() == ("vda", 1)


def test_the_watch_aborts_the_run_naming_the_disk_and_bounding_the_clean_up(monkeypatch):
    monkeypatch.setattr(disk_watch, "TICK", 0.05)
    planned = SimpleNamespace(disk_names=["/dev/vdb"])
    runner = Runner()
    watch = apply.stall_watch(planned, SimpleNamespace(disk_stall_seconds=1), runner)
    watch._read = lambda name: stat(3, 1)
    started = time.monotonic()
    with watch, pytest.raises(DiskStalled) as exc:
        runner.run(["sleep", "20"])
    assert time.monotonic() - started < 5
    assert str(exc.value) == ("disk /dev/vdb stopped answering: 1 requests in flight and none "
                              "finished for 1 s (--disk_stall_seconds); nothing more is "
                              "written to it")
    assert runner.after_fault == 1


class StuckWriter:
    """A BlockWriter whose second write never returns (a disk that stopped answering)."""

    def __init__(self):
        self.release = threading.Event()
        self.offset = 0

    def reserve(self, n):
        self.offset += n
        return self.offset - n

    def write_at(self, block, n, offset):
        if offset:
            self.release.wait()
        return 0

    def count_zeros(self, zeros):
        pass


def test_a_wait_for_an_image_write_gives_up_on_the_fault_and_leaves_the_write(monkeypatch):
    monkeypatch.setattr(blockwrite, "TICK", 0.05)
    fault = []
    writer = StuckWriter()
    writes = blockwrite.InFlight(writer, depth=1, fault=lambda: fault[0] if fault else None)
    writes.submit(b"x", 4096)
    threading.Timer(0.3, fault.append, (DiskStalled("disk /dev/vda stopped answering"),)).start()
    started = time.monotonic()
    with pytest.raises(DiskStalled):
        writes.submit(b"y", 4096)       # waits for the first, then the second never ends
        writes.drain()
    writes.close()                      # does not wait for the stuck write
    assert time.monotonic() - started < 3 and writes.abandoned
    writer.release.set()


def test_the_failed_step_names_itself_and_the_stalled_disk(tmp_path, monkeypatch):
    def stalls(step):
        raise DiskStalled("disk /dev/vda stopped answering: ...")

    ex = Executor(FakeRunner(), Events(), str(tmp_path))
    ex.handlers["mkfs"] = stalls
    step = Step("mkfs", {"device": "/dev/vda2", "fs_type": "ext4", "label": None,
                         "options": []})
    with pytest.raises(DiskStalled) as exc:
        ex.execute([step])
    assert str(exc.value).startswith("step 1/1 (mkfs /dev/vda2): disk /dev/vda stopped")


def test_a_step_that_failed_because_its_disk_went_away_says_so(tmp_path, monkeypatch):
    present = {"/dev/vdb": stat(1, 0)}
    monkeypatch.setattr(disk_watch, "sysfs_stat", lambda name: present.get(name))

    def unplugged(step):
        present.pop("/dev/vdb")         # hot-unplugged while mkfs wrote
        raise CommandError(["mkfs.ext4", "/dev/vdb1"], 1, stderr="Input/output error")

    monkeypatch.setattr(Executor, "do_mkfs", lambda self, step: unplugged(step))
    planned = SimpleNamespace(disk_names=["/dev/vdb"], resolved=None, steps=[
        Step("mkfs", {"device": "/dev/vdb1", "fs_type": "ext4", "label": None, "options": []})])
    conf = SimpleNamespace(disk_stall_seconds=0, target_root=str(tmp_path))
    with pytest.raises(DiskGone) as exc:
        apply._execute(planned, conf, FakeRunner(), Events())
    assert exc.value.exit_code == 4
    assert str(exc.value).startswith("step 1/1 (mkfs /dev/vdb1): disk /dev/vdb went away")
    assert "Input/output error" in str(exc.value)


def test_a_disk_removed_mid_run_fails_the_running_step_at_once(monkeypatch):
    # seen in the VM: after device_del the image's O_DIRECT open failed with EINVAL, its
    # buffered writes, fsync and e2fsck "succeeded"; only a later mount noticed
    monkeypatch.setattr(disk_watch, "TICK", 0.05)
    present = {"/dev/vda": stat(1, 0), "/dev/vdb": stat(1, 0)}
    monkeypatch.setattr(disk_watch, "sysfs_stat", lambda name: present.get(name))
    runner = Runner()
    watch = apply.stall_watch(SimpleNamespace(disk_names=["/dev/vda", "/dev/vdb"]),
                              SimpleNamespace(disk_stall_seconds=0), runner)
    threading.Timer(0.3, present.pop, ("/dev/vda",)).start()
    started = time.monotonic()
    with watch, pytest.raises(DiskGone) as exc:
        runner.run(["sleep", "20"])
    assert time.monotonic() - started < 5
    assert str(exc.value).startswith("disk /dev/vda went away")
    assert runner.after_fault == apply.GONE_CLEANUP_SECONDS


class PageCacheWriter:
    """A BlockWriter onto a removed disk's page cache: every write "succeeds" (so in the VM
    after device_del). The fourth write is where the disk goes: it waits (at most 5 s) for
    the watch to have seen it, as the 20 s image write of the VM case gave the watch time."""

    def __init__(self, present, runner):
        self.present, self.runner = present, runner
        self.offset, self.writes = 0, 0

    def reserve(self, n):
        self.offset += n
        return self.offset - n

    def write_at(self, block, n, offset):
        self.writes += 1
        if self.writes == 4:
            self.present.pop("/dev/vda")
            deadline = time.monotonic() + 5
            while self.runner.fault is None and time.monotonic() < deadline:
                time.sleep(0.01)
        return 0

    def count_zeros(self, zeros):
        pass


def test_a_disk_removed_while_the_image_is_written_fails_the_write_step_not_a_later_one(
        tmp_path, monkeypatch):
    # the VM case of 2026-11-29 06:24: the watch saw /dev/vda go 3 s into the image write,
    # but the writer (whose writes kept succeeding) wrote on, e2fsck and two mounts passed,
    # and only the mount of /dev/vda2 (step 14/16) failed
    monkeypatch.setattr(disk_watch, "TICK", 0.02)
    present = {"/dev/vda": stat(1, 0), "/dev/vdb": stat(1, 0)}
    monkeypatch.setattr(disk_watch, "sysfs_stat", lambda name: present.get(name))
    runner = Runner()
    writer = PageCacheWriter(present, runner)

    def write_image(step):
        writes = blockwrite.InFlight(writer, fault=lambda: runner.fault)
        try:
            for _ in range(64):
                writes.submit(b"x", 4096)
            writes.drain()
        finally:
            writes.close()

    ran = []
    ex = Executor(runner, Events(), str(tmp_path))
    ex.handlers.update(write_image=write_image, mount=lambda step: ran.append(step.device))
    steps = [Step("write_image", {"device": "/dev/vda1", "mount_point": None, "format": "raw",
                                  "uri": "http://images/root.img"},
                  description="raw image http://images/root.img to /dev/vda1"),
             Step("mount", {"device": "/dev/vdb1", "mount_point": "/data", "fs_type": "ext4"})]
    watch = apply.stall_watch(SimpleNamespace(disk_names=["/dev/vda", "/dev/vdb"]),
                              SimpleNamespace(disk_stall_seconds=0), runner)
    with watch, pytest.raises(DiskGone) as exc:
        ex.execute(steps)
    assert str(exc.value) == (
        "step 1/2 (raw image http://images/root.img to /dev/vda1): disk /dev/vda went away "
        "(removed from the machine, or its controller lost it): the kernel no longer lists "
        "it (no /sys/block/vda)")
    assert writer.writes < 8        # stopped within the writes in flight, not at the end
    assert ran == []                # nothing after it ran


def test_a_fault_that_came_while_a_step_ran_fails_that_step_though_its_tools_succeeded(
        tmp_path):
    runner = Runner()

    def e2fsck(step):       # a removed disk's e2fsck "succeeded" in the VM
        runner.abort(DiskGone("disk /dev/vda went away"))
        return {"ok": True}

    ex = Executor(runner, Events(), str(tmp_path))
    ex.handlers["mkfs"] = e2fsck
    ex.handlers["mount"] = lambda step: pytest.fail("a step ran after the fault")
    with pytest.raises(DiskGone, match=r"^step 1/2 \(mkfs /dev/vda2\): disk /dev/vda went"):
        ex.execute([Step("mkfs", {"device": "/dev/vda2", "fs_type": "ext4", "label": None,
                                  "options": []}),
                    Step("mount", {"device": "/dev/vda2", "mount_point": "/",
                                   "fs_type": "ext4"})])
