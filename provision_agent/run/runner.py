"""The one way provision-agent runs an external program.

Argument lists only (never a shell), every call logged with its duration, output captured, and
a failure raised as CommandError carrying the command, exit code and stderr. Drivers take a
Runner so unit tests can hand them a fake one.
"""

import json
import logging
import os
import select
import subprocess
import threading
import time
from dataclasses import dataclass

from provision_agent.errors import CommandError

LOG = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 600
# After SIGKILL a program exits at once, unless it waits in the kernel on a disk that does
# not answer (uninterruptible sleep): it is then left behind rather than waited for forever.
KILL_GRACE = 10
TICK = 1.0      # how often a running command looks for a fault (abort()) while it waits
_LOG_PAIR = threading.Lock()


@dataclass(frozen=True)
class Result:
    argv: tuple
    returncode: int
    stdout: str
    stderr: str
    seconds: float


class Runner:
    def __init__(self, env=None):
        # A fixed C locale keeps tool output parseable whatever the ramdisk's locale is.
        self.env = dict(os.environ, LC_ALL="C", LANG="C", **(env or {}))
        # abort(): the run's fault (a stalled disk); commands running then are killed and
        # raise it, and every command after it gets at most after_fault seconds (the
        # clean-up's umount of a dead disk's filesystem must not wait the full timeout)
        self.fault = None
        self.after_fault = None
        self._live = set()
        self._aborted = set()       # the ones running at abort(): they raise the fault
        self._live_lock = threading.Lock()

    def abort(self, fault, after_fault=None):
        """From another thread: fail the running commands with fault (kill them) and bound
        those after it by after_fault seconds."""
        self.fault, self.after_fault = fault, after_fault
        with self._live_lock:
            live = list(self._live)
            self._aborted.update(live)
        for proc in live:
            _kill(proc)

    def run(self, argv, *, check=True, timeout=DEFAULT_TIMEOUT, input=None, ok_codes=(0,),
            log_input=False):
        """Run argv and return a Result; raise CommandError unless its exit code is in ok_codes.

        input is logged only with log_input (a partition script, say): stdin is where a
        secret would travel, so by default the log says only how long it was.
        """
        argv = [str(a) for a in argv]
        if not argv:
            raise ValueError("empty command")
        with _LOG_PAIR:     # a command and its stdin stay together when steps run at once
            LOG.info("run: %s%s", " ".join(argv), " < stdin" if input is not None else "")
            if input is not None:
                # one line, JSON-quoted: the log is read back line by line (benchmarks replay it)
                LOG.debug("stdin of %s: %s", argv[0], json.dumps(input) if log_input
                          else f"{len(input)} characters, not logged")
        start = time.monotonic()
        if self.fault is not None and self.after_fault:
            timeout = min(timeout or self.after_fault, self.after_fault)
        proc, stdout, stderr = self._communicate(argv, input, timeout)
        took = time.monotonic() - start
        result = Result(tuple(argv), proc.returncode, stdout, stderr, took)
        LOG.debug("exit %s after %.2fs: %s", proc.returncode, took, argv[0])
        if stderr.strip():
            LOG.debug("stderr of %s: %s", argv[0], stderr.strip())
        if check and proc.returncode not in ok_codes:
            raise CommandError(argv, proc.returncode, stdout, stderr)
        return result

    def _communicate(self, argv, input, timeout):
        """(the exited Popen, stdout, stderr); raises CommandError when it cannot start or
        times out, the fault when abort() came while it ran. Waits in TICK steps to see an
        abort, and never waits for a killed program longer than KILL_GRACE."""
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else
                                    subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, env=self.env)
        except FileNotFoundError:
            raise CommandError(argv, 127, reason="could not start: program not found")
        with self._live_lock:
            self._live.add(proc)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                wait = TICK if deadline is None else max(0.0, min(TICK, deadline -
                                                                  time.monotonic()))
                try:
                    stdout, stderr = proc.communicate(input, timeout=wait)
                    if proc in self._aborted:       # killed by abort() before this look
                        raise self.fault
                    return proc, stdout, stderr
                except subprocess.TimeoutExpired:
                    input = None        # communicate() sends it once; a retry carries on
                if proc in self._aborted:
                    _abandon(proc, argv, "was killed: a disk stopped answering")
                    raise self.fault
                if deadline is not None and time.monotonic() >= deadline:
                    out, err = _abandon(proc, argv, f"timed out after {timeout}s")
                    raise CommandError(argv, None, out, err,
                                       reason=f"timed out after {timeout}s")
        finally:
            with self._live_lock:
                self._live.discard(proc)
                self._aborted.discard(proc)

    def run_feeding(self, argv, feed, *, timeout=DEFAULT_TIMEOUT, ok_codes=(0,)):
        """Run argv with feed(write) streaming its stdin (e.g. an image into tar); like run().

        Output goes to temporary files so a chatty program cannot block on a full pipe while
        we are still writing to it. The feed's writes and the wait for the exit look for
        abort() every TICK: a program that stops reading because it waits in the kernel on a
        disk that does not answer (tar writing into it) would otherwise hold the feed on a
        full pipe for ever; the fault is raised instead and the program left behind. timeout
        bounds the wait once the feed has ended (the feed lasts as long as its source, which
        has its own deadlines).
        """
        import tempfile
        argv = [str(a) for a in argv]
        LOG.info("run: %s (stdin streamed)", " ".join(argv))
        start = time.monotonic()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=err,
                                        env=self.env)
            except FileNotFoundError:
                raise CommandError(argv, 127, reason="could not start: program not found")
            with self._live_lock:
                self._live.add(proc)
            try:
                broken = self._feed(proc, argv, feed)
                self._wait_fed(proc, argv, timeout)
            finally:
                with self._live_lock:
                    self._live.discard(proc)
                    self._aborted.discard(proc)
            out.seek(0)
            err.seek(0)
            stdout = out.read().decode(errors="replace")
            stderr = err.read().decode(errors="replace")
        took = time.monotonic() - start
        LOG.debug("exit %s after %.2fs: %s", proc.returncode, took, argv[0])
        if proc.returncode not in ok_codes or broken:
            raise CommandError(argv, proc.returncode, stdout, stderr,
                               reason=None if proc.returncode else "stopped reading its input")
        return Result(tuple(argv), proc.returncode, stdout, stderr, took)

    def _feed(self, proc, argv, feed):
        """feed(write) into proc's stdin; True when the program stopped reading (a broken
        pipe: its exit code and stderr say why)."""
        pipe = _Pipe(proc.stdin, lambda: self._raise_if_aborted(proc, argv))
        broken = False
        try:
            feed(pipe.write)
        except BrokenPipeError:
            broken = True
        except BaseException as exc:
            if pipe.aborted:            # an abort's program was killed and given its grace
                raise
            _kill(proc)
            _reap(proc, argv, "was stopped: its input failed")
            if proc in self._aborted:
                # abort() killed the program and the feed met that first (a broken pipe, the
                # rest of the stream judged without it, 2026-11-29): the fault is the cause
                raise self.fault from exc
            raise
        finally:
            try:
                proc.stdin.close()
            except BrokenPipeError:
                broken = True
        return broken

    def _raise_if_aborted(self, proc, argv):
        """The run's fault, once abort() killed proc (given KILL_GRACE to go, then left)."""
        if proc in self._aborted:
            _reap(proc, argv, "was killed: a disk stopped answering")
            raise self.fault

    def _wait_fed(self, proc, argv, timeout):
        """Wait for proc's exit in TICK steps: timeout seconds at most, and no longer than an
        abort() once it came."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = TICK if deadline is None else max(0.0, min(TICK, deadline -
                                                              time.monotonic()))
            try:
                proc.wait(timeout=wait)
                if proc in self._aborted:       # killed by abort() before this look
                    raise self.fault
                return
            except subprocess.TimeoutExpired:
                pass
            self._raise_if_aborted(proc, argv)
            if deadline is not None and time.monotonic() >= deadline:
                _kill(proc)
                _reap(proc, argv, f"timed out after {timeout}s")
                raise CommandError(argv, None, reason=f"timed out after {timeout}s")


class _Pipe:
    """A program's stdin written without blocking: each write waits for room with poll() in
    TICK steps and calls look() between them (which raises the run's fault), so a reader
    that stopped reading never holds the writer past an abort()."""

    def __init__(self, stream, look):
        self.fd = stream.fileno()
        os.set_blocking(self.fd, False)
        self._look = look
        self.aborted = False
        self._poll = select.poll()
        self._poll.register(self.fd, select.POLLOUT)

    def write(self, data):
        view = memoryview(data).cast("B")
        while view:
            try:
                self._look()
            except BaseException:
                self.aborted = True
                raise
            if not self._poll.poll(TICK * 1000):
                continue
            try:
                view = view[os.write(self.fd, view):]
            except BlockingIOError:
                continue    # the room went to no one else; poll again


def _kill(proc):
    try:
        proc.kill()
    except OSError:
        pass


def _abandon(proc, argv, why):
    """Kill proc and give it KILL_GRACE seconds to go; its output so far, or ("", "") and a
    warning when it would not go (stuck in the kernel on a disk: waiting would be forever)."""
    _kill(proc)
    try:
        return proc.communicate(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        LOG.warning("%s %s and did not exit %ss after SIGKILL (it waits in the kernel, on a "
                    "device that does not answer): left behind", argv[0], why, KILL_GRACE)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        return "", ""


def _reap(proc, argv, why):
    """Wait KILL_GRACE seconds for a killed proc; past that it is left behind (as _abandon)."""
    try:
        proc.wait(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        LOG.warning("%s %s and did not exit %ss after SIGKILL (it waits in the kernel, on a "
                    "device that does not answer): left behind", argv[0], why, KILL_GRACE)
