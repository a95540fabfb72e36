"""Image progress for people and programs: a bar on a TTY, else a log line every few seconds,
and always the rate-limited JSON events of provision_agent.run.events.Events."""

import logging
import sys
import time

LOG = logging.getLogger(__name__)
LOG_EVERY = 5.0
BAR_EVERY = 0.2


def _mib(n):
    return n / (1 << 20)


class Progress:
    def __init__(self, events, total=None, label="image", stream=None):
        self.events = events
        self.total = total
        self.label = label
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = self._last = time.monotonic()
        self.done = 0

    def update(self, done):
        self.done = done
        if self.events is not None:
            self.events.progress(done, self.total)
        now = time.monotonic()
        if now - self._last < (BAR_EVERY if self.tty else LOG_EVERY):
            return
        self._last = now
        self._show(now)

    def _show(self, now, end=""):
        rate = _mib(self.done) / max(now - self.start, 1e-6)
        if self.total:
            pct = 100.0 * self.done / self.total
            text = f"{self.label}: {_mib(self.done):.0f}/{_mib(self.total):.0f} MiB " \
                   f"({pct:.0f}%) {rate:.0f} MiB/s"
        else:
            text = f"{self.label}: {_mib(self.done):.0f} MiB {rate:.0f} MiB/s"
        if self.tty:
            filled = int(30 * self.done / self.total) if self.total else 0
            bar = "#" * filled + "-" * (30 - filled) if self.total else ""
            self.stream.write(f"\r[{bar}] {text}\x1b[K{end}" if bar else f"\r{text}\x1b[K{end}")
            self.stream.flush()
        else:
            LOG.info("%s", text)

    def finish(self):
        if self.events is not None:
            self.events.progress(self.done, self.total, force=True)
        self._show(time.monotonic(), end="\n")
