"""examples/vendor-plugin, the package docs/extending.md walks a vendor through, as pip
installs it: its step is planned before the wipe, its section checked with the document, and
its run calls the vendor's tool (tests/e2e/test_vendor_ramdisk.py builds it into a ramdisk)."""

import json

import pytest

from provision_agent.plan import extensions, steps
from tests.unit.helpers import run_cli, sample
from tests.vmbench.ramdisk import REPO_ROOT


@pytest.fixture
def installed(tmp_path, monkeypatch):
    dist = tmp_path / "site" / "acme_provision-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-provision\nVersion: 1.0\n")
    entry = (REPO_ROOT / "examples" / "vendor-plugin" / "pyproject.toml").read_text()
    assert 'acme_firmware = "acme_provision.firmware:FirmwareSettings"' in entry
    (dist / "entry_points.txt").write_text(
        "[provision_agent.step_kinds]\nacme_firmware = acme_provision.firmware:FirmwareSettings\n")
    # the package's own directory behind the metadata written here: a build of the example in
    # place leaves an acme_provision.egg-info there, whose entry points would be read instead
    monkeypatch.syspath_prepend(str(REPO_ROOT / "examples" / "vendor-plugin"))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield
    extensions._LOADED.clear()
    steps.KINDS.pop("acme_firmware", None)


def _doc(settings):
    doc = sample("single-disk")
    doc["extensions"] = {"acme_firmware": {"settings": settings}}
    return doc


def test_the_settings_are_planned_before_the_wipe_in_name_order(tmp_path, installed):
    rc, out, err = run_cli(tmp_path, _doc({"SriovEnable": "Enabled", "BootMode": "Uefi"}),
                           "three-disks", extra=["--plan_format", "json"])
    assert rc == 0, err
    got = json.loads(out)["steps"]
    assert [s["kind"] for s in got[:3]] == ["acme_firmware", "acme_firmware", "wipe"]
    assert [s["description"] for s in got[:2]] == ["ACME firmware: BootMode = Uefi",
                                                   "ACME firmware: SriovEnable = Enabled"]


@pytest.mark.parametrize("settings,says", [
    ({"SriovEnable": "yes"}, "settings.SriovEnable: ACME firmware takes Enabled or Disabled"),
    ({"9lives": "x"}, "$.extensions.acme_firmware.settings"),
    ({}, "$.extensions.acme_firmware.settings"),
])
def test_a_bad_section_is_refused_with_its_place(tmp_path, installed, settings, says):
    rc, out, err = run_cli(tmp_path, _doc(settings), "three-disks")
    assert rc == 2 and says in err, err


@pytest.fixture
def hardware(tmp_path, monkeypatch):
    """The example's hardware plug-in installed, its CLI on PATH writing to a file here."""
    from provision_agent.run import hardware as hw
    from tests.plugins.harness import install_plugins
    entry = (REPO_ROOT / "examples" / "vendor-plugin" / "pyproject.toml").read_text()
    assert 'acme = "acme_provision.hardware:AcmeHardware"' in entry
    # the package's own directory first, so the metadata install_plugins writes comes before
    # any acme_provision.egg-info a build of the example in place left there (stale entry points)
    monkeypatch.syspath_prepend(str(REPO_ROOT / "examples" / "vendor-plugin"))
    install_plugins(tmp_path, monkeypatch, {"acme": "acme_provision.hardware:AcmeHardware"},
                    package="acme-provision", namespace=hw.NAMESPACE)
    monkeypatch.setenv("PATH", f"{REPO_ROOT / 'examples' / 'vendor-plugin'}:/usr/bin:/bin")
    monkeypatch.setenv("ACME_FWCLI_STATE", str(tmp_path / "settings"))
    return tmp_path / "settings"


def test_its_ironic_step_is_offered_where_its_cli_is_and_runs_it(tmp_path, hardware,
                                                                  monkeypatch):
    from provision_agent.cli import hardware_commands
    from provision_agent.cli import main as cli
    monkeypatch.setattr(hardware_commands, "own_inventory", lambda conf: {"disks": []})
    rc, out, err = _main(cli, ["steps"])
    assert rc == 0, err
    assert [(s["step"], s["types"]) for s in json.loads(out)["steps"]] == [
        ("acme_apply_settings", ["clean", "deploy", "service"])]
    request = tmp_path / "step.json"
    request.write_text(json.dumps({"step": "acme_apply_settings", "type": "service",
                                   "args": {"settings": {"BootMode": "Uefi"}}}))
    rc, out, err = _main(cli, ["step", "--input_data_file", str(request)])
    assert rc == 0, err
    assert json.loads(out)["result"]["applied"] == ["BootMode"]
    assert hardware.read_text() == "BootMode=Uefi\n"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")     # no CLI: not ACME's machine
    rc, out, err = _main(cli, ["steps"])
    assert rc == 0 and json.loads(out)["steps"] == [], err


def _main(cli, argv):
    import contextlib
    import io
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, out.getvalue(), err.getvalue()
