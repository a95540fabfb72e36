"""The JSON plan's schema with plug-ins (issue 59): plan-v1.json stays what it was for plans
without them; `provision plan-schema` composes it with the installed plug-ins' steps, and a
plan carrying the example vendor's steps validates against that, not against plan-v1.json."""

import contextlib
import io
import json

import jsonschema
import pytest

from provision_agent.cli import main as cli
from tests.plugins import harness
from tests.unit.helpers import REPO, run_cli, sample

plugins = harness.plugins
PLAN_V1 = REPO / "provision_agent" / "schema" / "plan-v1.json"


def _plan_schema():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["plan-schema"])
    assert rc == 0, err.getvalue()
    return json.loads(out.getvalue())


def _vendor_plan(tmp_path):
    doc = sample("uefi")
    doc["extensions"] = {
        "vendor_raid": {"controller": "slot1", "volumes": [{"level": 1, "slots": [0, 1]}]},
        "vendor_agent": {"server": "mgmt.example", "licence_key": "LIC-1234-abcd"}}
    rc, out, err = run_cli(tmp_path, doc, "three-disks", extra=["--plan_format", "json"])
    assert rc == 0, err
    return json.loads(out)


def test_without_plugins_plan_schema_prints_plan_v1(monkeypatch, tmp_path):
    harness.install_plugins(tmp_path, monkeypatch, {})
    assert _plan_schema() == json.loads(PLAN_V1.read_text())


def test_a_plan_with_vendor_steps_validates_against_the_composed_schema(tmp_path, plugins):
    plan = _vendor_plan(tmp_path)
    composed = _plan_schema()
    jsonschema.Draft202012Validator.check_schema(composed)
    jsonschema.validate(plan, composed)
    assert "plug-in 'vendor_agent', package example-vendor-steps" in \
        composed["$defs"]["vendor_agent"]["description"]
    with pytest.raises(jsonschema.ValidationError):     # why the composition is needed
        jsonschema.validate(plan, json.loads(PLAN_V1.read_text()))


def test_the_composed_schema_refuses_a_vendor_step_with_wrong_arguments(tmp_path, plugins):
    plan = _vendor_plan(tmp_path)
    (raid,) = [s for s in plan["steps"] if s["kind"] == "vendor_raid"]
    raid["args"]["level"] = "one"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(plan, _plan_schema())
