"""A site's own step kind, installed as a stevedore plug-in (tests/plugins/example_vendor.py):
its section of the document is checked with the rest, its steps show in the dry run's plan in
their phase, and the executor runs them through its handler table."""

import json

import pytest

from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline
from provision_agent.run.events import Events
from provision_agent.run.executor import Executor
from tests.plugins import harness
from tests.unit.fakes import FakeRunner
from tests.unit.helpers import inventory, run_cli, sample


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The example plug-in's distribution metadata, as pip would install it."""
    harness.install_plugins(tmp_path, monkeypatch, harness.EXAMPLE)
    yield
    harness.forget(harness.EXAMPLE)


def _doc(**section):
    doc = sample("single-disk")
    doc["extensions"] = {"vendor_raid": section or {
        "controller": "slot1", "volumes": [{"level": 1, "slots": [0, 1]}]}}
    return doc


def test_the_dry_run_plans_the_plugin_step_before_any_wipe(tmp_path, installed):
    rc, out, err = run_cli(tmp_path, _doc(), "three-disks", extra=["--plan_format", "json"])
    assert rc == 0, err
    kinds = [s["kind"] for s in json.loads(out)["steps"]]
    assert kinds[0] == "vendor_raid" and kinds[1] == "wipe"
    step = json.loads(out)["steps"][0]
    assert step["args"] == {"controller": "slot1", "level": 1, "slots": [0, 1]}
    assert step["description"] == "RAID1 on controller slot1 over slots [0, 1]"


@pytest.mark.parametrize("section,where,why", [
    ({"controller": "bay-7", "volumes": [{"level": 1, "slots": [0, 1]}]},
     "$.extensions.vendor_raid.controller", "does not match"),
    ({"controller": "slot1", "volumes": [{"level": 1, "slots": [0, 1, 2]}]},
     "$.extensions.vendor_raid", "RAID1 on this controller takes two slots"),
])
def test_its_section_is_checked_with_the_document(tmp_path, installed, section, where, why):
    rc, out, err = run_cli(tmp_path, _doc(**section), "three-disks")
    assert rc == 2
    assert where in err and why in err, err


def test_a_section_for_a_kind_that_is_not_installed_is_refused(tmp_path):
    rc, out, err = run_cli(tmp_path, _doc(), "three-disks")
    assert rc == 2
    assert "$.extensions.vendor_raid: no step kind 'vendor_raid' is installed" in err


def test_the_executor_runs_it_through_its_handler_table(tmp_path, installed):
    layout = pipeline.load_layout(_doc(), "native")
    planned = pipeline.build_plan(layout, inv_mod.from_document(inventory("three-disks")))
    runner = FakeRunner()
    first = [s for s in planned.steps if s.kind == "vendor_raid"]
    report = Executor(runner, Events(), str(tmp_path)).execute(first)
    assert runner.calls[0] == ["vendor-raidcli", "--controller", "slot1", "create",
                               "--level", "1", "--slots", "0,1"]
    assert report["steps"][0] == {"index": 1, "kind": "vendor_raid",
                                  "description": "RAID1 on controller slot1 over slots [0, 1]",
                                  "seconds": report["steps"][0]["seconds"],
                                  "result": {"controller": "slot1"}}
