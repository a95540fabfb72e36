"""The agent started before /init's network wait is over (provision_agent/agent/startup.py)."""

import logging
import threading

from provision_agent.agent import ironic, startup


def test_the_lookup_waits_for_inits_file_then_goes_on(tmp_path):
    flag = tmp_path / "network-waited"
    threading.Timer(0.3, flag.touch).start()
    startup.after_network(str(flag), 10)
    assert flag.exists()


def test_without_the_file_the_wait_ends_at_its_bound_and_says_so(tmp_path, caplog):
    now = [0.0]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    with caplog.at_level(logging.WARNING):
        startup.after_network(str(tmp_path / "never"), 2, clock=lambda: now[0], sleep=sleep)
    assert 1.9 <= now[0] <= 2.1 and set(slept) == {startup.AFTER_POLL}
    assert "did not appear within 2 s: looking up without waiting" in caplog.text


def test_no_file_no_wait_and_the_options_default_to_none():
    startup.after_network(None, 90, sleep=lambda _s: (_ for _ in ()).throw(AssertionError))
    args = ironic.parse_args([])
    assert args.after is None and args.after_seconds == startup.AFTER_SECONDS
    assert ironic.parse_args(["--after", "/run/x"]).after == "/run/x"
