"""The runner: what it logs of a command's standard input; its deadlines with a child that
outlives SIGKILL and abort() (issue 57)."""

import json
import logging
import subprocess
import threading
import time

import pytest

from provision_agent.errors import CommandError, DiskStalled
from provision_agent.run import runner
from provision_agent.run.runner import Runner


def test_stdin_is_fed_and_logged_only_when_asked(caplog):
    caplog.set_level(logging.DEBUG, logger="provision_agent.run.runner")
    script = "label: dos\n/dev/vda1 : start=2048\n"
    assert Runner().run(["cat"], input=script, log_input=True).stdout == script
    shown = [r.getMessage() for r in caplog.records]
    assert "run: cat < stdin" in shown
    logged = next(m for m in shown if m.startswith("stdin of cat: "))
    assert json.loads(logged.removeprefix("stdin of cat: ")) == script     # one line, exact

    caplog.clear()
    assert Runner().run(["cat"], input="s3cret\n").stdout == "s3cret\n"
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "s3cret" not in text and "stdin of cat: 7 characters, not logged" in text


def _unkillable(monkeypatch):
    """A child SIGKILL does not end: what one waiting in the kernel on a disk that does not
    answer is (uninterruptible sleep); kill() reaches nothing."""
    monkeypatch.setattr(subprocess.Popen, "kill", lambda self: None)
    monkeypatch.setattr(runner, "KILL_GRACE", 1, raising=False)


def test_a_timed_out_command_that_outlives_sigkill_is_left_behind_not_waited_for(monkeypatch):
    _unkillable(monkeypatch)
    started = time.monotonic()
    with pytest.raises(CommandError, match="timed out after 0.5s"):
        Runner().run(["sleep", "20"], timeout=0.5)
    assert time.monotonic() - started < 5      # before: the 20 s of the sleep, or forever


def test_abort_fails_the_running_command_with_the_fault_and_bounds_the_next(monkeypatch):
    _unkillable(monkeypatch)
    run = Runner()
    stalled = DiskStalled("disk /dev/vdb stopped answering")
    threading.Timer(0.5, run.abort, (stalled, 2)).start()
    started = time.monotonic()
    with pytest.raises(DiskStalled) as exc:
        run.run(["sleep", "20"])
    assert exc.value is stalled
    assert time.monotonic() - started < 4       # the tick, the grace, slack
    # the clean-up after it (an umount of the dead disk's filesystem) gets 2 s, not 600
    started = time.monotonic()
    with pytest.raises(CommandError, match="timed out after 2s"):
        run.run(["sleep", "20"])
    assert time.monotonic() - started < 5
    # a command that is quick still runs and succeeds after the fault
    assert run.run(["echo", "ok"]).stdout == "ok\n"
