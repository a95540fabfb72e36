"""A command's outcome as the last event of its events file: ok, or the error's exit code and
its text (the conductor's last_error takes its first line from it)."""

import contextlib

from provision_agent import errors


@contextlib.contextmanager
def reported(events):
    """Records the body's outcome in events and closes them; the error still propagates."""
    try:
        yield
        events.result("ok", errors.EXIT_OK)
    except errors.ProvisionError as exc:
        events.result("failed", exc.exit_code, str(exc)[-4000:])   # redacted by Events
        raise
    finally:
        events.close()
