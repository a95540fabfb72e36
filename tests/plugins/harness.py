"""A plug-in author's test kit (docs/extending.md, "Testing a plug-in"): install a plug-in's
entry points as pip would, without installing anything, and forget them afterwards.

    from tests.plugins.harness import install_plugins

    def test_mine(tmp_path, monkeypatch):
        install_plugins(tmp_path, monkeypatch, {"vendor_raid": "mypkg.raid:VendorRaid"})
        ...

`plugins` (a pytest fixture) does the same with the example vendor package. For a run on real
block devices use `provision --allow_loop_devices` on loop devices (docs/extending.md).
"""

import pytest

from provision_agent.plan import extensions, steps


def install_plugins(tmp_path, monkeypatch, entry_points, package="example-vendor-steps"):
    """Distribution metadata declaring `entry_points` ({name: "module:Class"}) in namespace
    provision_agent.step_kinds, on sys.path for this test; loaded plug-ins forgotten after it
    (monkeypatch undoes sys.path, the finalizer the registrations)."""
    dist = tmp_path / "site" / f"{package.replace('-', '_')}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[provision_agent.step_kinds]\n"
        + "".join(f"{name} = {target}\n" for name, target in entry_points.items()))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    forget(entry_points)
    monkeypatch.setattr(extensions, "_LOADED", {})
    return dist


def forget(names):
    for name in names:
        extensions._LOADED.pop(name, None)
        steps.KINDS.pop(name, None)


EXAMPLE = {"vendor_raid": "tests.plugins.example_vendor:VendorRaid",
           "vendor_agent": "tests.plugins.example_vendor:VendorAgent"}


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """The example vendor package (tests/plugins/example_vendor.py) installed."""
    install_plugins(tmp_path, monkeypatch, EXAMPLE)
    yield EXAMPLE
    forget(EXAMPLE)
