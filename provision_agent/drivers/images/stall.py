"""The stall deadline of an image download: fewer than min_bytes in a window of `seconds`
while connected (sources.HttpSource judges the time between connections itself)."""

import threading
import time

from provision_agent.bounded_http import shutdown


class StallWatch:
    """Cuts a connection that delivers fewer than min_bytes in any `seconds`-long window.

    The per-read timeout only fires when nothing at all arrives; a server dripping a byte a
    second keeps a download alive for days. Shutting the socket down from this thread makes
    the blocked read return, and the reader then reports the stall. A window starts with each
    connection and only runs while there is one (pause()): the time between a drop and the
    next connection is an outage, which HttpSource bounds by the same seconds itself, so an
    outage shorter than the deadline never counts against the connection after it.
    """

    TICK = 1.0      # how often the window is looked at: a stall is cut within seconds + TICK

    def __init__(self, min_bytes, seconds, clock=time.monotonic):
        self.min_bytes, self.seconds = min_bytes, seconds
        self.stalled = False
        self._clock = clock
        self._resp = None
        self._got = 0
        self._since = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    def watch(self, resp):
        with self._lock:
            self._resp, self._got, self._since = resp, 0, self._clock()
        if self._thread is None and self.seconds:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name="image-stall-watch")
            self._thread.start()

    def pause(self):
        with self._lock:
            self._resp, self._since = None, None

    def note(self, n):
        with self._lock:
            self._got += n

    def stop(self):
        self._stop.set()

    def check(self):
        """Judge the window if it is over; True when the connection stalled (it is shut)."""
        with self._lock:
            if self._since is None or self._clock() - self._since < self.seconds:
                return False
            got, resp = self._got, self._resp
            self._got, self._since = 0, self._clock()
        if got < self.min_bytes:
            self.stalled = True
            shutdown(resp)
            return True
        return False

    def _run(self):
        while not self._stop.wait(min(self.TICK, self.seconds)):
            if self.check():
                return
