"""The runner: what it logs of a command's standard input."""

import json
import logging

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
