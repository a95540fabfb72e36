"""A deadline for every step that scales with the disks, not with the step: a disk the plan
writes has stalled when it has requests in flight and none of them (nor any other) finishes
for `seconds` (issue 57). Total time says nothing: a 4 TiB image write is minutes of steady
progress, a stalled partition table write is one request that never comes back.

The kernel's own counters say it: /sys/block/<disk>/stat holds the requests completed (reads,
writes, discards, flushes) and those in flight. One thread reads them every TICK for the
plan's disks while the plan runs; on a stall it calls on_stall(disk, in_flight) once and
stops. The caller (apply.py) fails the run through Runner.abort(): the running command is
killed, the image writer stops waiting for its writes (blockwrite.InFlight), and the run
reports the step and the disk. A program or thread stuck in the kernel on that disk cannot be
waited for; it is left behind (runner.py, cli/main.py).
"""

import logging
import os
import threading
import time

LOG = logging.getLogger(__name__)

TICK = 1.0
# /sys/block/<disk>/stat (Documentation/block/stat.rst): completed reads, writes, discards,
# flushes at these fields; requests in flight at IN_FLIGHT. Older kernels have fewer fields.
COMPLETED = (0, 4, 11, 15)
IN_FLIGHT = 8


def sysfs_stat(name):
    """The stat fields of /dev/<name>'s whole disk (its kernel name: a by-id link or a
    multipath map's /dev/mapper name are followed), or None when it is gone."""
    kernel = os.path.basename(os.path.realpath(name))
    try:
        with open(f"/sys/block/{kernel}/stat") as f:
            return [int(v) for v in f.read(4096).split()]
    except (OSError, ValueError):
        return None


def progress(fields):
    """(requests completed, requests in flight) from one stat line's fields."""
    done = sum(fields[i] for i in COMPLETED if i < len(fields))
    return done, fields[IN_FLIGHT] if len(fields) > IN_FLIGHT else 0


class DiskWatch:
    """watch = DiskWatch(["/dev/vda"], 120, on_stall); with watch: ...run the plan..."""

    def __init__(self, disks, seconds, on_stall, *, on_gone=None, read=None,
                 clock=time.monotonic):
        self.disks, self.seconds, self.on_stall = list(disks), seconds, on_stall
        self.on_gone = on_gone      # on_gone(disk): the kernel no longer has it
        self._read, self._clock = read or (lambda disk: sysfs_stat(disk)), clock
        self._seen = {}         # disk -> (requests completed, since when, were some waiting)
        self._stop = threading.Event()
        self._thread = None
        self.stalled = None     # (disk, requests in flight) once a stall was seen

    def __enter__(self):
        self.disks = [d for d in self.disks if self._read(d) is not None]  # only the real ones
        if self.disks and (self.seconds or self.on_gone):
            self._thread = threading.Thread(target=self._run, name="disk-stall-watch",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        return False

    def gone(self):
        """The watched disks the kernel no longer has (hot-unplugged, lost)."""
        return [disk for disk in self.disks if self._read(disk) is None]

    def check(self):
        """Look once; the (disk, in flight) that stalled, or None."""
        now = self._clock()
        for disk in self.disks:
            fields = self._read(disk)
            if fields is None or not self.seconds:
                continue        # gone: look_gone() says so
            done, in_flight = progress(fields)
            last = self._seen.get(disk)
            if last is None or done != last[0] or not in_flight or not last[2]:
                # moving, nothing asked of it, or requests waiting from now on
                self._seen[disk] = (done, now, bool(in_flight))
                continue
            if now - last[1] >= self.seconds:
                return disk, in_flight
        return None

    def look_gone(self):
        """on_gone(disk) for the first watched disk the kernel no longer has; True if one.
        A disk removed mid-run must fail the step at once: a tool may not notice (a buffered
        write into a removed disk's page cache, even its fsync, was seen to succeed)."""
        gone = self.gone()
        if gone and self.on_gone:
            LOG.error("disk %s went away", gone[0])
            self.on_gone(gone[0])
        return bool(gone)

    def _run(self):
        while not self._stop.wait(min(TICK, self.seconds or TICK)):
            if self.look_gone():
                return
            found = self.check()
            if found:
                self.stalled = found
                LOG.error("disk %s: %d requests in flight and none finished for %d s",
                          found[0], found[1], self.seconds)
                self.on_stall(*found)
                return
