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
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.syspath_prepend(str(REPO_ROOT / "examples" / "vendor-plugin"))
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
