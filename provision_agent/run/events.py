"""Structured progress events: one JSON object per line, for the Ironic driver to relay.

    {"event": "step", "index": 3, "count": 20, "kind": "mkfs", "status": "start", ...}
    {"event": "progress", "step": 3, "bytes": 104857600, "total": 2147483648}
    {"event": "result", "status": "ok" | "failed", "exit_code": 0, "message": "..."}

Events go to --events_file (appended) and/or --events_fd. Without either, emitting is a no-op,
so drivers can always be handed an Events object.
"""

import json
import os
import threading
import time

from provision_agent import redact


class Events:
    def __init__(self, streams=(), progress_interval=1.0):
        self._streams = list(streams)
        self._lock = threading.Lock()
        self._interval = progress_interval
        self._last_progress = {}
        self.current_step = None

    @classmethod
    def from_conf(cls, conf):
        streams = []
        if getattr(conf, "events_file", None):
            streams.append(open(conf.events_file, "a", buffering=1))
        if getattr(conf, "events_fd", None) is not None:
            streams.append(os.fdopen(os.dup(conf.events_fd), "w", buffering=1))
        return cls(streams)

    def emit(self, event, **fields):
        if not self._streams:
            return
        # Events reach Ironic's node records: nothing secret goes out (redact.py).
        line = json.dumps(redact.document(dict(event=event, time=round(time.time(), 3),
                                               **fields)), sort_keys=False, default=str)
        with self._lock:
            for stream in self._streams:
                stream.write(line + "\n")
                stream.flush()

    def step(self, index, count, kind, status, **extra):
        self.current_step = index
        self.emit("step", index=index, count=count, kind=kind, status=status, **extra)

    def progress(self, done, total=None, step=None, force=False):
        """Rate-limited: at most one event per interval per step, plus the final one."""
        step = self.current_step if step is None else step
        now = time.monotonic()
        last = self._last_progress.get(step, 0.0)
        if not force and now - last < self._interval and done != total:
            return
        self._last_progress[step] = now
        self.emit("progress", step=step, bytes=done, total=total)

    def result(self, status, exit_code, message=""):
        self.emit("result", status=status, exit_code=exit_code, message=message)

    def close(self):
        for stream in self._streams:
            try:
                stream.close()
            except OSError:
                pass
        self._streams = []
