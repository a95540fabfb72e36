"""Run the per-node SSH polls of a periodic sweep in the conductor's worker pool, a bounded
number at a time.

The periodic sweep goes through the waiting nodes one after the other, in one thread. A poll
is an SSH login plus a few SFTP reads (about 0.2 s on loopback) and, while a ramdisk is still
booting, can wait connect_timeout (10 s) for nothing: done inline, 50 booting nodes made one
sweep last 50 x 10 s. So the sweep only hands each node to a worker and waits while
`limit` polls are already running, like Ironic's own power state sync. A node whose previous
poll has not finished is skipped, so one node is never polled twice at once. A poll may carry
tags, each with its share of the `limit` (pace.py: looks that start jobs, looks at slow
ramdisks): a poll whose tag has its share running is skipped, not waited for, so that the
next node, of another kind, may have the slot.
"""

import contextlib
import logging
import threading
import time

LOG = logging.getLogger(__name__)


class Busy(Exception):
    """No slot freed within the wait; the sweep should stop and try again next time."""


class FanOut:
    def __init__(self):
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._running = set()
        self._tags = {}    # key -> the tags of its running poll
        self._began = {}   # key -> time.monotonic() when its running poll began
        self._ended = {}   # key -> time.monotonic() when its last poll ended
        self._hurried = set()   # keys to look at as soon as the poll interval allows
        self.peak = 0      # most polls running at once since start (logged, read by tests)

    def running(self):
        with self._lock:
            return len(self._running)

    def since_last(self, key):
        """Seconds since key's last poll ended (infinity if never, or still running: 0)."""
        with self._lock:
            if key in self._running:
                return 0.0
            ended = self._ended.get(key)
        return float("inf") if ended is None else time.monotonic() - ended

    def keep_only(self, keys):
        """Forget when the polls of keys not in keys ended (nodes no longer waiting)."""
        with self._lock:
            for key in set(self._ended) - set(keys):
                del self._ended[key]
            self._hurried &= set(keys)

    def hurry(self, key):
        """key's next poll should not wait for its usual turn (cleared when one starts)."""
        with self._lock:
            self._hurried.add(key)

    def hurried(self, key):
        with self._lock:
            return key in self._hurried

    def _full(self, tags, shares):
        """Whether a tag of tags has its share of polls running."""
        for tag in tags:
            if tag in (shares or {}) and sum(
                    tag in t for t in self._tags.values()) >= shares[tag]:
                return True
        return False

    @contextlib.contextmanager
    def claim(self, key, limit, tags=(), shares=None):
        """Yields True while this thread polls key itself (in a worker it already has),
        False when a poll of key is running (never two at once, as with submit) or `limit`
        polls are: a heartbeat's look counts against the same bound as the sweep's, or a
        burst of heartbeats (500 jobs ending together) would hold every conductor worker
        in SSH at once; and a tag's share counts as with submit."""
        with self._lock:
            mine = (key not in self._running and len(self._running) < limit
                    and not self._full(tags, shares))
            if mine:
                self._start(key, tags)
        try:
            yield mine
        finally:
            if mine:
                self._done(key)

    def strained(self, seconds, tag):
        """Whether a running poll has run seconds or longer, or carries tag."""
        with self._lock:
            since = time.monotonic() - seconds
            return any(tag in t for t in self._tags.values()) or any(
                began <= since for began in self._began.values())

    def _start(self, key, tags=()):
        self._running.add(key)
        self._tags[key] = frozenset(tags)
        self._began[key] = time.monotonic()
        self._hurried.discard(key)
        self.peak = max(self.peak, len(self._running))

    def submit(self, key, spawn, func, *args, limit, wait, tags=(), shares=None):
        """spawn(wrapped, *args) in a slot for key. False when key is already running, or a
        tag of tags has its share (shares: {tag: most polls}) running; Busy when no slot
        freed within `wait` seconds; spawn's own errors propagate."""
        deadline = time.monotonic() + wait
        with self._cond:
            if key in self._running or self._full(tags, shares):
                return False
            while len(self._running) >= limit:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Busy(f"{limit} polls still running after {wait:.1f} s")
                self._cond.wait(left)
                if key in self._running or self._full(tags, shares):
                    return False
            self._start(key, tags)
            count = len(self._running)
        LOG.debug("provision poll of %s handed to a worker (%d running)", key, count)
        try:
            spawn(self._run, key, func, *args)
        except BaseException:
            self._done(key)
            raise
        return True

    def _run(self, key, func, *args):
        try:
            return func(*args)
        finally:
            self._done(key)

    def _done(self, key):
        with self._cond:
            self._running.discard(key)
            self._tags.pop(key, None)
            self._began.pop(key, None)
            self._ended[key] = time.monotonic()
            self._cond.notify()


# The conductor's one set of pollers: the periodic sweep (deploy.py) and the heartbeats
# (heartbeat.py) share it, so that neither starts a poll of a node the other is running.
FOLLOWERS = FanOut()
