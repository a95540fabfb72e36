"""Stopping the helper services the tests start (Ironic, Glance, BMC emulators)."""

import subprocess


def stop(proc, timeout=20):
    """SIGTERM, then SIGKILL if it is still there after timeout seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
