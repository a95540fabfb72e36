"""The release artefacts install where docs/ironic.md says: the sdist and wheel built from this
tree (python -m build, the wheel from the sdist), `pip install provision-agent[ironic]` into a
clean venv that already holds Ironic (a conductor's own environment), and there Ironic's
entry points load the interfaces and `provision --version` says the version git gives
(setuptools-scm: the last tag and the commits since). tox -e package."""

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import setuptools_scm

REPO = Path(__file__).resolve().parents[2]
# The Ironic of the conductor: the newest supported (tox.ini [ironic-series]).
IRONIC = os.environ.get("PACKAGE_IRONIC", "ironic==39.0.0")
GROUPS = ("ironic.hardware.interfaces.deploy", "ironic.hardware.interfaces.raid",
          "ironic.hardware.types", "oslo.config.opts", "console_scripts")

# Run in the conductor's venv: every entry point of ours, loaded and (an interface or a
# hardware type, as Ironic's driver factory does) instantiated.
LOAD = """
import importlib.metadata, json, sys
import ironic.tests.unit  # noqa: F401  (Ironic's threading backend first)
loaded = {}
for group in sys.argv[1:]:
    for ep in importlib.metadata.entry_points(group=group):
        if ep.dist.name != "provision-agent":
            continue
        obj = ep.load()
        if group.startswith("ironic."):
            obj()
        loaded.setdefault(group, []).append(ep.name)
print(json.dumps(loaded))
"""


def _run(args, **kwargs):
    done = subprocess.run(args, capture_output=True, text=True, timeout=1200, **kwargs)
    assert done.returncode == 0, f"{args}: {done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def version():
    """What git says the version is (setuptools-scm, as the build asks it), read once: a
    commit made while the suite runs must not change what the artefacts are checked against."""
    return setuptools_scm.get_version(root=str(REPO))


@pytest.fixture(scope="module")
def dist(tmp_path_factory, version):
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)])
    return out


@pytest.fixture(scope="module")
def conductor(tmp_path_factory, dist, version):
    """A clean venv with Ironic in it, then provision-agent[ironic] from the built wheel."""
    env = tmp_path_factory.mktemp("conductor")
    venv.create(env, with_pip=True)
    pip = [str(env / "bin" / "python"), "-m", "pip", "install", "-q"]
    _run(pip + [IRONIC, "fixtures", "oslotest"])
    _run(pip + ["--find-links", str(dist), f"provision-agent[ironic]=={version}"])
    return env


def test_the_sdist_and_the_wheel_carry_the_git_version(dist, version):
    names = sorted(p.name for p in dist.iterdir())
    assert names == [f"provision_agent-{version}-py3-none-any.whl",
                     f"provision_agent-{version}.tar.gz"], names


def test_provision_says_the_git_version(conductor, version):
    assert _run([str(conductor / "bin" / "provision"), "--version"]).split()[-1] == version


def test_ironic_loads_every_entry_point_of_ours(conductor):
    loaded = json.loads(_run([str(conductor / "bin" / "python"), "-c", LOAD, *GROUPS],
                             cwd="/"))
    assert loaded["ironic.hardware.interfaces.deploy"] == ["provision"]
    assert loaded["ironic.hardware.interfaces.raid"] == ["provision"]
    assert sorted(loaded["ironic.hardware.types"]) == [
        "provision-ipmi", "provision-manual-management", "provision-redfish"]
    assert sorted(loaded["oslo.config.opts"]) == ["ironic_driver", "provision_agent"]
    assert sorted(loaded["console_scripts"]) == ["provision", "provision-ironic-agent"]


def test_nothing_in_the_conductors_venv_conflicts(conductor):
    """pip's own check: our requirements and Ironic's agree."""
    _run([str(conductor / "bin" / "python"), "-m", "pip", "check"])


def test_the_wheel_carries_the_schemas(conductor):
    count = _run([str(conductor / "bin" / "python"), "-c",
                  "import importlib.resources as r; print(len([f for f in "
                  "r.files('provision_agent').joinpath('schema').iterdir() "
                  "if f.name.endswith('.json')]))"], cwd="/")
    assert int(count) == len(list((REPO / "provision_agent" / "schema").glob("*.json")))
