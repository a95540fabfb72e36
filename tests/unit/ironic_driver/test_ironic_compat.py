"""The interface loads on the Ironic releases before 39, whose periodic decorator compares
`spacing > 0` itself (FIELD_NOTES 2026-11-28: Ironic 29.1.0 and 35.1.0 refused the provision
interface with DriverLoadError)."""

import types

import futurist.periodics
import pytest
from ironic.conductor import periodics

from ironic_driver import ironic_compat


def _ironic_29_periodic(spacing, enabled=True, **kwargs):
    """Ironic 29.x's ironic.conductor.periodics.periodic, as it decides whether to run."""
    return futurist.periodics.periodic(spacing=spacing, enabled=enabled and spacing > 0,
                                       **kwargs)


OLD = types.SimpleNamespace(periodic=_ironic_29_periodic)   # no refresh_periodic_attributes


def test_before_ironic_39_the_spacing_is_the_number(monkeypatch):
    monkeypatch.setattr(ironic_compat, "periodics", OLD)
    with pytest.raises(TypeError):          # what a callable did there
        OLD.periodic(spacing=lambda: 10)(lambda self: None)
    task = OLD.periodic(spacing=ironic_compat.periodic_spacing(lambda: 10))(lambda self: None)
    assert task._periodic_spacing == 10 and task._is_periodic


def test_ironic_39_reads_the_option_once_its_configuration_is_loaded():
    read = lambda: 10    # noqa: E731
    assert ironic_compat.periodic_spacing(read) is read
    task = periodics.periodic(spacing=ironic_compat.periodic_spacing(read))(lambda self: None)
    periodics.refresh_periodic_attributes(task)
    assert task._periodic_spacing == 10 and task._is_periodic


def test_the_deploy_interfaces_sweep_is_a_periodic_of_the_configured_spacing():
    from ironic_driver import deploy
    task = deploy.ProvisionDeploy._follow_provision
    periodics.refresh_periodic_attributes(task)
    assert task._periodic_spacing == deploy.CONF.provision_agent.poll_interval
