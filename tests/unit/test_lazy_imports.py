"""A layout run that needs no retry does not import tenacity (and with it asyncio: 0.2 s of
start-up in the ramdisk under TCG); a retry still goes through it."""

import os
import subprocess
import sys

from provision_agent.drivers import udev
from provision_agent.errors import CommandError
from tests.unit.fakes import FakeRunner

CODE = """
import sys
import provision_agent.cli.main, provision_agent.run.apply, provision_agent.run.executor
import provision_agent.data_drivers.native, provision_agent.drivers.discovery
import provision_agent.machine.preflight, provision_agent.cli.input_source
from provision_agent.drivers import udev
udev.wait_for_devices(None, ["/"])
print(sorted(m for m in ("tenacity", "asyncio") if m in sys.modules))
"""


def test_a_run_without_retries_never_imports_tenacity():
    res = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_a_reread_that_fails_is_still_retried_through_tenacity(monkeypatch):
    monkeypatch.setattr("time.sleep", lambda s: None)
    r = FakeRunner(fail=("partprobe", "blockdev --rereadpt"))
    try:
        udev.reread_partitions(r, "/dev/vdq")
    except CommandError:
        pass
    else:
        raise AssertionError("a re-read that always fails must fail")
    assert r.lines().count("partprobe /dev/vdq") == 6


def test_a_device_that_appears_late_is_waited_for():
    seen = []

    def exists(path):
        seen.append(path)
        return len(seen) > 2          # missing at the fast check and the first retry
    udev.wait_for_devices(FakeRunner(), ["/dev/vdq1"], timeout=5, exists=exists)
    assert len(seen) == 3
