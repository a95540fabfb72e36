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


def _refreshed(task):
    """The task's periodic attributes as the installed Ironic's conductor sees them: Ironic 39
    reads a callable spacing once its configuration is loaded, earlier releases never."""
    if hasattr(periodics, "refresh_periodic_attributes"):
        periodics.refresh_periodic_attributes(task)
    return task


def test_the_installed_ironic_gets_the_spacing_in_the_form_it_takes():
    read = lambda: 10    # noqa: E731
    spacing = ironic_compat.periodic_spacing(read)
    if hasattr(periodics, "refresh_periodic_attributes"):      # Ironic 39 (2026.2) and later
        assert spacing is read
    else:                                                       # 29.x, 32.x, 35.x
        assert spacing == 10
    task = _refreshed(periodics.periodic(spacing=spacing)(lambda self: None))
    assert task._periodic_spacing == 10 and task._is_periodic


def test_the_deploy_interfaces_sweep_is_a_periodic_of_the_configured_spacing():
    from ironic_driver import deploy
    task = _refreshed(deploy.ProvisionDeploy._follow_provision)
    assert task._periodic_spacing == deploy.CONF.provision_agent.poll_interval
    assert task._is_periodic


# --- which Ironic releases load the interface (issue 61) -------------------------------------

REPO = __import__("pathlib").Path(__file__).resolve().parents[3]

# Loads the deploy interface as a conductor does (Ironic's driver factory, with `provision`
# enabled), the installed Ironic's metadata saying the version given in argv[1].
LOAD = """
import importlib.metadata, sys
real = importlib.metadata.version
importlib.metadata.version = lambda name: sys.argv[1] if name == "ironic" else real(name)
import ironic.tests.unit  # noqa: F401  (the threading backend, before Ironic's other modules)
from ironic.common import driver_factory, exception
from ironic.conf import CONF
CONF([], project="ironic")
CONF.set_override("enabled_hardware_types", ["fake-hardware"])
CONF.set_override("enabled_deploy_interfaces", ["provision", "fake"])
try:
    print("LOADED", sorted(driver_factory._INTERFACE_LOADERS["deploy"]().names))
except exception.DriverLoadError as exc:
    print("REFUSED", exc)
"""


def _load_as(version):
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", LOAD, version], capture_output=True, text=True,
                          timeout=120, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_conductor_on_an_ironic_before_2025_1_refuses_the_interface_naming_both_versions():
    line = _load_as("28.0.0")
    assert line.startswith("REFUSED Driver, hardware type or interface provision could not be")
    assert "runs Ironic 28.0.0" in line and "supports Ironic 29.0 (OpenStack 2025.1)" in line
    assert "upgrade Ironic to a maintained series" in line


def test_a_conductor_on_a_supported_ironic_loads_the_interface():
    assert _load_as("29.0.0") == "LOADED ['fake', 'provision']"


@pytest.mark.parametrize("version", ["29.0.0", "29.1.0", "32.1.0", "35.1.0", "39.0.0"])
def test_every_release_of_the_supported_series_is_accepted(version, caplog):
    assert ironic_compat.require_supported(version) == ironic_compat.release(version)
    assert not caplog.records


@pytest.mark.parametrize("version", ["28.0.0", "26.1.6", "24.1.5", "9.1.6"])
def test_an_older_release_is_refused_saying_what_to_do(version):
    with pytest.raises(ironic_compat.UnsupportedIronic) as raised:
        ironic_compat.require_supported(version)
    assert f"runs Ironic {version}" in str(raised.value)
    assert "enabled_deploy_interfaces" in str(raised.value)


@pytest.mark.parametrize("version", ["", "unknown", "master"])
def test_a_version_that_says_no_release_is_refused(version):
    with pytest.raises(ironic_compat.UnsupportedIronic, match="cannot tell which Ironic release"):
        ironic_compat.require_supported(version)


def test_no_ironic_metadata_is_refused(monkeypatch):
    monkeypatch.setattr(ironic_compat, "installed_version", lambda: None)
    with pytest.raises(ironic_compat.UnsupportedIronic, match="version None"):
        ironic_compat.require_supported()


def test_a_release_newer_than_the_newest_tested_loads_with_a_warning(caplog):
    assert ironic_compat.require_supported("40.0.0.0rc2.dev3") == (40, 0)
    assert "Ironic 40.0.0.0rc2.dev3 is newer than the newest release" in caplog.text


def test_the_installed_ironic_is_supported():
    assert ironic_compat.require_supported() >= ironic_compat.OLDEST


def test_the_newest_tested_is_the_one_tox_pins():
    import configparser
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(REPO / "tox.ini")
    assert tox["ironic-series"]["newest"] == ironic_compat.NEWEST_TESTED
    assert f"ironic=={ironic_compat.NEWEST_TESTED}" in tox["ironic"]["deps"].split()
    oldest = ironic_compat.release(tox["ironic-series"]["oldest"])
    assert oldest[0] == ironic_compat.OLDEST[0]


# --- OCI: pull secrets and plain HTTP (Ironic 35, 2026.1, changed both) ------------------------

def _node(secret):
    return types.SimpleNamespace(uuid="0b9c2a51-57c1-4b55-a5ee-0dc3c8f1a1e2", driver_info={},
                                 instance_info={"image_pull_secret": secret,
                                                "image_source": "oci://registry.example/im:1"})


def _ironic_29_auth_override(node, permit_user_auth=True):
    """Ironic 29.x's image_service.get_image_service_auth_override, as it reads the secret."""
    if permit_user_auth and "image_pull_secret" in node.instance_info:
        return {"username": "", "password": node.instance_info["image_pull_secret"]}
    if "image_pull_secret" in node.driver_info:
        return {"username": "", "password": node.driver_info["image_pull_secret"]}
    return None


@pytest.fixture
def ironic_29_secrets(monkeypatch):
    from ironic.common import image_service
    monkeypatch.setattr(image_service, "get_image_service_auth_override",
                        _ironic_29_auth_override)
    ironic_compat._ironic_splits_pull_secrets.cache_clear()
    yield
    ironic_compat._ironic_splits_pull_secrets.cache_clear()


def test_before_ironic_35_a_user_password_secret_is_split_as_35_splits_it(ironic_29_secrets):
    assert not ironic_compat._ironic_splits_pull_secrets()
    assert ironic_compat.image_pull_auth(_node("robot$ci:pa:ss")) == {
        "username": "robot$ci", "password": "pa:ss"}
    # a token stays a token; the tenant's secret is not read when the tenant may not give one
    assert ironic_compat.image_pull_auth(_node("tok3n")) == {"username": "", "password": "tok3n"}
    assert ironic_compat.image_pull_auth(_node("u:p"), permit_user_auth=False) is None


def test_the_installed_ironic_and_the_compat_read_a_secret_alike():
    assert ironic_compat.image_pull_auth(_node("robot$ci:pa:ss")) == {
        "username": "robot$ci", "password": "pa:ss"}
    assert ironic_compat.image_pull_auth(_node("tok3n")) == {"username": "", "password": "tok3n"}


def test_the_tls_advice_names_the_options_this_ironic_has(monkeypatch):
    from ironic.conf import CONF
    advice = ironic_compat.oci_tls_advice()
    if "permit_fallback_to_http_transport" in CONF.oci:
        assert "[oci]verify_ca" in advice and "[oci]permit_fallback_to_http_transport" in advice
    else:
        assert "REQUESTS_CA_BUNDLE" in advice and "only over TLS" in advice
    monkeypatch.setattr(ironic_compat, "oci_speaks_plain_http", lambda: False)
    assert "[oci]" not in ironic_compat.oci_tls_advice()


# --- set_node_cleaning_steps (Ironic 32, 2025.2, added use_existing_steps) ---------------------

def _task(**internal):
    return types.SimpleNamespace(node=types.SimpleNamespace(driver_internal_info=internal))


def test_on_ironic_29_the_cleaning_steps_are_set_without_use_existing_steps(monkeypatch):
    """CI's ironic-driver-oldest (29.1.0) failed the vendor clean step tests with `TypeError:
    set_node_cleaning_steps() got an unexpected keyword argument 'use_existing_steps'`."""
    from ironic.conductor import steps
    calls = []

    def ironic_29(task, disable_ramdisk=False):
        calls.append((task, disable_ramdisk))
    monkeypatch.setattr(steps, "set_node_cleaning_steps", ironic_29)
    task = _task(declarative_cleaning=True)
    ironic_compat.set_node_cleaning_steps(task)
    assert calls == [(task, False)]


@pytest.mark.parametrize("internal, existing",
                         [({"declarative_cleaning": True}, True), ({}, False)])
def test_from_ironic_32_a_manual_or_runbook_cleaning_checks_the_steps_it_was_given(
        monkeypatch, internal, existing):
    from ironic.conductor import steps
    calls = []

    def ironic_32(task, disable_ramdisk=False, use_existing_steps=False):
        calls.append(use_existing_steps)
    monkeypatch.setattr(steps, "set_node_cleaning_steps", ironic_32)
    ironic_compat.set_node_cleaning_steps(_task(**internal))
    assert calls == [existing]

