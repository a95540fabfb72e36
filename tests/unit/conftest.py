import signal

import pytest

WATCHDOG_S = 10      # a linear match of these inputs takes milliseconds; quadratic takes minutes


def _alarm(signum, frame):
    raise TimeoutError(f"took more than {WATCHDOG_S} s: backtracking")


@pytest.fixture
def watchdog():
    """Fails a test that runs longer than WATCHDOG_S: a pattern that backtracks on purpose-made
    input, which would otherwise hang the suite."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(WATCHDOG_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)
