import logging

# Ironic's test package picks the threading backend; it must come before any other ironic import.
import ironic.tests.unit  # noqa: F401
import pytest


@pytest.fixture(autouse=True)
def _our_loggers_stay_enabled():
    """Ironic's database fixture runs its migrations, whose alembic logging config disables every
    logger that exists already; the unit tests after these read our logs. Every logger enabled
    before the test is enabled again after it, whatever its name: a list of prefixes missed the
    CLI's own "provision" logger, and test_main's validate printed nothing when it ran after a
    test of this package on the same worker."""
    enabled = [lg for lg in logging.root.manager.loggerDict.values()
               if isinstance(lg, logging.Logger) and not lg.disabled]
    yield
    for logger in enabled:
        logger.disabled = False
