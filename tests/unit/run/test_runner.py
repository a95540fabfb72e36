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


class _Endless:
    """An image stream that never ends (the feed only stops by the fault)."""

    def read(self, n):
        return b"\0" * n


def _fake_tar(tmp_path, body):
    """A `tar` first on the runner's PATH: body is its shell script."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tar = bindir / "tar"
    tar.write_text("#!/bin/sh\n" + body + "\n")
    tar.chmod(0o755)
    return Runner(env={"PATH": f"{bindir}:/usr/bin:/bin"})


def _in_thread(call, seconds):
    """call() in a thread, given `seconds`: (returned or raised, how long), or AssertionError
    naming a call still blocked (before issue 57's fix the feed blocked for ever)."""
    got = {}

    def run():
        t0 = time.monotonic()
        try:
            got["value"] = call()
        except BaseException as exc:    # noqa: BLE001 - handed to the test
            got["value"] = exc
        got["took"] = time.monotonic() - t0

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still blocked after {seconds} s"
    return got["value"], got["took"]


def _extract_fails_at_the_abort(run, source, target, block):
    """formats.extract_tar of source through run, aborted 1 s in with a disk stall: the
    stall is what it raises, by the abort, the tick, the killed program's grace (1 s here)
    and some slack, or _in_thread's AssertionError after 15 s."""
    from provision_agent.drivers.images import formats
    stalled = DiskStalled("disk /dev/vdb stopped answering")
    threading.Timer(1.0, run.abort, (stalled, 2)).start()
    raised, took = _in_thread(lambda: formats.extract_tar(run, source, str(target), block), 15)
    assert raised is stalled, raised
    assert took < 5, took


def test_a_tar_that_stops_reading_its_feed_fails_the_feed_at_the_abort(monkeypatch, tmp_path):
    """tar waiting in the kernel on a stalled disk reads no more of its pipe and outlives
    SIGKILL: the feeder's write on the full pipe must give up at the stall watch's abort."""
    _unkillable(monkeypatch)
    run = _fake_tar(tmp_path, "exec sleep 30")      # never reads its stdin
    _extract_fails_at_the_abort(run, _Endless(), tmp_path, 1 << 20)


def test_a_tar_stuck_after_its_feed_ended_fails_at_the_abort(monkeypatch, tmp_path):
    """The wait for tar's exit after the last byte is bounded by the abort too (tar
    flushing into a stalled disk), whatever the command's own timeout (none for tar)."""
    _unkillable(monkeypatch)
    run = _fake_tar(tmp_path, "cat >/dev/null; exec sleep 30")

    class Short:
        left = 3

        def read(self, n):
            self.left -= 1
            return b"\0" * n if self.left > 0 else b""

    _extract_fails_at_the_abort(run, Short(), tmp_path, 4096)


def test_a_fed_program_still_gets_all_its_input_and_a_quitter_still_fails():
    data = bytes(range(256)) * 4096     # 1 MiB, more than a pipe holds
    chunks = [data[i:i + 65536] for i in range(0, len(data), 65536)]

    def feed(write):
        for chunk in chunks:
            write(chunk)

    got = Runner().run_feeding(["sha256sum"], feed)
    import hashlib
    assert got.stdout.split()[0] == hashlib.sha256(data).hexdigest()
    with pytest.raises(CommandError, match="stopped reading its input"):
        Runner().run_feeding(["true"], feed)


def test_a_killed_tar_whose_pipe_broke_still_fails_with_the_fault(tmp_path):
    """In the VM the abort killed tar (waiting on dirty pages, which SIGKILL ends): the feed
    met the broken pipe first, judged the rest of the stream as trailing data and raised an
    image error, and the run went on to take the image back on the dead disk. The fault the
    abort came with is what the feed must raise."""
    run = _fake_tar(tmp_path, "exec sleep 30")

    class Data:
        def read(self, n):
            time.sleep(0.01)
            return b"x" * n         # not tar padding: data after tar's end of archive

    _extract_fails_at_the_abort(run, Data(), tmp_path, 65536)
