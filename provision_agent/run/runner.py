"""The one way provision-agent runs an external program.

Argument lists only (never a shell), every call logged with its duration, output captured, and
a failure raised as CommandError carrying the command, exit code and stderr. Drivers take a
Runner so unit tests can hand them a fake one.
"""

import json
import logging
import os
import subprocess
import threading
import time
from dataclasses import dataclass

from provision_agent.errors import CommandError

LOG = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 600
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
        try:
            proc = subprocess.run(
                argv, input=input, capture_output=True, text=True, timeout=timeout,
                env=self.env, check=False)
        except FileNotFoundError:
            raise CommandError(argv, 127, reason="could not start: program not found")
        except subprocess.TimeoutExpired as exc:
            raise CommandError(argv, None, exc.stdout or "", exc.stderr or "",
                               reason=f"timed out after {timeout}s")
        took = time.monotonic() - start
        result = Result(tuple(argv), proc.returncode, proc.stdout, proc.stderr, took)
        LOG.debug("exit %s after %.2fs: %s", proc.returncode, took, argv[0])
        if proc.stderr.strip():
            LOG.debug("stderr of %s: %s", argv[0], proc.stderr.strip())
        if check and proc.returncode not in ok_codes:
            raise CommandError(argv, proc.returncode, proc.stdout, proc.stderr)
        return result

    def run_feeding(self, argv, feed, *, timeout=DEFAULT_TIMEOUT, ok_codes=(0,)):
        """Run argv with feed(write) streaming its stdin (e.g. an image into tar); like run().

        Output goes to temporary files so a chatty program cannot block on a full pipe while
        we are still writing to it.
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
            broken = False
            try:
                feed(proc.stdin.write)
            except BrokenPipeError:
                broken = True       # the program quit early; its exit code and stderr say why
            except BaseException:
                proc.kill()
                proc.wait()
                raise
            finally:
                try:
                    proc.stdin.close()
                except BrokenPipeError:
                    broken = True
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise CommandError(argv, None, reason=f"timed out after {timeout}s")
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
