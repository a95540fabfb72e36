import logging

# Ironic's test package picks the threading backend; it must come before any other ironic import.
import ironic.tests.unit  # noqa: F401
import pytest


@pytest.fixture(autouse=True)
def _our_loggers_stay_enabled():
    """Ironic's database fixture runs its migrations, whose alembic logging config disables every
    logger that exists already, ours included; the unit tests after these read our logs."""
    yield
    for name, logger in logging.root.manager.loggerDict.items():
        if isinstance(logger, logging.Logger) and name.startswith(("provision_agent",
                                                                   "ironic_driver")):
            logger.disabled = False
