"""The bounded hand-off of per-node polls to worker threads (ironic_driver.conversation.fanout)."""

import concurrent.futures
import threading
import time

import pytest

from ironic_driver.conversation import fanout


@pytest.fixture
def pool():
    with concurrent.futures.ThreadPoolExecutor(16) as executor:
        yield executor


def test_never_more_than_limit_at_once_and_every_node_polled(pool):
    fan, lock, now, most, seen = fanout.FanOut(), threading.Lock(), [0], [0], []

    def poll(key):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        time.sleep(0.05)
        with lock:
            now[0] -= 1
            seen.append(key)

    for key in range(12):
        assert fan.submit(key, pool.submit, poll, key, limit=3, wait=5) is True
    deadline = time.monotonic() + 5
    while fan.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(seen) == list(range(12))
    assert most[0] == 3 and fan.peak == 3 and fan.running() == 0


def test_a_node_still_polled_is_skipped_not_polled_twice(pool):
    fan, release, calls = fanout.FanOut(), threading.Event(), []
    fan.submit("n1", pool.submit, lambda: (calls.append(1), release.wait(5)), limit=4, wait=1)
    assert fan.submit("n1", pool.submit, calls.append, 2, limit=4, wait=1) is False
    release.set()
    deadline = time.monotonic() + 5
    while fan.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls == [1]
    assert fan.submit("n1", pool.submit, calls.append, 3, limit=4, wait=1) is True


def test_busy_when_no_slot_frees_in_time(pool):
    fan, release = fanout.FanOut(), threading.Event()
    fan.submit("a", pool.submit, release.wait, 5, limit=1, wait=1)
    t0 = time.monotonic()
    with pytest.raises(fanout.Busy):
        fan.submit("b", pool.submit, print, limit=1, wait=0.3)
    assert 0.25 < time.monotonic() - t0 < 2
    release.set()


def test_a_refused_spawn_gives_the_slot_back():
    fan = fanout.FanOut()

    def full(*_args):
        raise RuntimeError("no free worker")

    with pytest.raises(RuntimeError):
        fan.submit("a", full, print, limit=1, wait=0.1)
    assert fan.running() == 0
    ran = []
    fan.submit("a", lambda f, *a: f(*a), ran.append, "x", limit=1, wait=0.1)
    assert ran == ["x"] and fan.running() == 0


def test_a_failing_poll_gives_the_slot_back(pool):
    fan = fanout.FanOut()
    fut = []

    def spawn(func, *args):
        fut.append(pool.submit(func, *args))

    fan.submit("a", spawn, lambda: 1 / 0, limit=1, wait=1)
    with pytest.raises(ZeroDivisionError):
        fut[0].result(5)
    assert fan.running() == 0


def _polled(fan, key, seconds_ago):
    """Record key's last poll as ended seconds_ago."""
    fan._ended[key] = time.monotonic() - seconds_ago


def test_the_sweep_starts_jobs_first_then_looks_at_the_least_recently_seen():
    from ironic_driver.deploy import sweep_order
    fan = fanout.FanOut()
    start = {"provision_phase": "wait_ramdisk"}
    run = {"provision_phase": "running"}
    _polled(fan, "r-seen-5s-ago", 5)
    _polled(fan, "r-seen-30s-ago", 30)
    _polled(fan, "r-seen-just-now", 0.5)        # within the interval: not due
    _polled(fan, "s-retried", 3)
    _polled(fan, "gone", 1)                      # no longer waiting: forgotten
    nodes = [("r-seen-5s-ago", run), ("r-never", run), ("r-seen-30s-ago", run),
             ("s-retried", start), ("r-seen-just-now", run), ("s-new", start)]
    assert sweep_order(nodes, fan, interval=2, running_interval=60) == [
        ("s-new", True, False), ("s-retried", True, False),
        ("r-never", False, False), ("r-seen-30s-ago", False, False),
        ("r-seen-5s-ago", False, False)]
    assert "gone" not in fan._ended


def test_a_running_job_whose_ramdisk_heartbeats_is_looked_at_by_the_clock_or_when_hurried():
    from ironic_driver.deploy import sweep_order
    fan = fanout.FanOut()
    beats = {"provision_phase": "running", "provision_heartbeats": 3}
    static = {"provision_phase": "running"}
    unheard = {"provision_phase": "wait_ramdisk", "provision_awaiting_heartbeat": True}
    for key, ago in (("hb-5s", 5), ("hb-40s", 40), ("hb-hurried", 3), ("hb-hurried-1s", 1),
                     ("static-5s", 5), ("unheard-5s", 5), ("unheard-40s", 40)):
        _polled(fan, key, ago)
    fan.hurry("hb-hurried")
    fan.hurry("hb-hurried-1s")
    nodes = [("hb-5s", beats), ("hb-40s", beats), ("hb-hurried", beats),
             ("hb-hurried-1s", beats), ("static-5s", static), ("hb-never", beats),
             ("unheard-5s", unheard), ("unheard-40s", unheard)]
    # hb-5s waits for its 30 s; hb-hurried-1s for the poll interval, hurried or not; the
    # ramdisk said hb-hurried's job exited: it goes before the ones due by the clock; a node
    # whose ramdisk never heartbeated is looked at by the clock too (its heartbeat starts it)
    assert sweep_order(nodes, fan, interval=2, running_interval=30) == [
        ("unheard-40s", True, False),
        ("hb-hurried", False, False), ("hb-never", False, False), ("hb-40s", False, False),
        ("static-5s", False, False)]


def test_a_poll_in_a_heartbeats_own_worker_excludes_the_sweeps_and_clears_the_hurry(pool):
    fan, release = fanout.FanOut(), threading.Event()
    fan.hurry("n1")
    with fan.claim("n1", 2) as mine:
        assert mine and not fan.hurried("n1")
        assert fan.submit("n1", pool.submit, release.wait, 5, limit=2, wait=1) is False
        with fan.claim("n1", 2) as again:
            assert again is False
        with fan.claim("n2", 1) as full:
            assert full is False                 # the one slot is n1's
    assert 0.0 <= fan.since_last("n1") < 5 and fan.running() == 0
    fan.hurry("n1")
    fan.keep_only([])                            # the node stopped waiting
    assert not fan.hurried("n1")


def test_a_node_being_polled_is_not_due_and_its_end_is_remembered(pool):
    fan, release = fanout.FanOut(), threading.Event()
    assert fan.since_last("n1") == float("inf")
    fan.submit("n1", pool.submit, release.wait, 5, limit=2, wait=1)
    assert fan.since_last("n1") == 0.0
    release.set()
    deadline = time.monotonic() + 5
    while fan.running() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert 0.0 <= fan.since_last("n1") < 5
