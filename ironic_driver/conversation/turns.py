"""Database-write turns: at most a few threads of this conductor process record provision
progress at once.

The polls themselves (SSH) run in parallel, up to [conductor]periodic_max_workers, but their
database writes need not: each is a lock upgrade (a write), the save, and for a finished job
the resume. On sqlite, the database of a standalone Ironic, a write that meets another fails
with 'database is locked' and Ironic retries it after 0.1-1 s, and the retries take the CPU
that the next write needs; one turn queued the writes behind each other's retry sleeps, three
overlap them (benchmarks/ironic_scale.md).

A turn is held for database work only, never across SSH: a ramdisk that is slow to answer
must not keep other nodes' progress from being recorded. Waiting for a turn is bounded too:
past WAIT_SECONDS the write goes ahead without one (a turn only paces writes; it guards no
data).
"""

import logging
import threading

LOG = logging.getLogger(__name__)

WAIT_SECONDS = 30


class Writer:
    def __init__(self, turns=1, wait=WAIT_SECONDS):
        self._lock = threading.BoundedSemaphore(turns)
        self._mine = threading.local()
        self.wait = wait

    def enter(self):
        """Take a turn (once per thread until leave); False when none freed in time."""
        if getattr(self._mine, "held", False):
            return True
        if not self._lock.acquire(timeout=self.wait):
            LOG.warning("No database-write turn freed within %s s; recording provision "
                        "progress without one", self.wait)
            return False
        self._mine.held = True
        return True

    def leave(self):
        if getattr(self._mine, "held", False):
            self._mine.held = False
            self._lock.release()


WRITER = Writer(turns=3)
