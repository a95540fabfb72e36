"""The JSON plan is a public contract: its schema (schema/plan-v1.json) and the step table in
docs/plan-format.md are what the step classes say, and every plan the planner makes from the
samples keeps to that schema."""

import json
import os
import subprocess
import sys

import jsonschema
import pytest

from tests import REPO_ROOT
from tests.unit.helpers import run_cli, sample

ROOT = REPO_ROOT
SAMPLES = sorted(f[:-5] for f in os.listdir(os.path.join(ROOT, "samples"))
                 if f.endswith(".json"))
DRIVER = {"provision": "nailgun", "provision-vm": "nailgun", "ironic-layout": "ironic",
          "ironic-partition-image": "ironic", "ironic-whole-disk": "ironic"}
INVENTORY = {"provision": "fuel-three-disks"}


def test_schema_and_doc_are_generated_from_the_step_classes():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "plan_format.py"),
                           "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", SAMPLES)
def test_every_samples_plan_keeps_to_the_schema(tmp_path, name):
    with open(os.path.join(ROOT, "provision_agent", "schema", "plan-v1.json")) as f:
        schema = json.load(f)
    rc, out, err = run_cli(tmp_path, sample(name), INVENTORY.get(name, "three-disks"),
                           extra=["--data_driver", DRIVER.get(name, "native"),
                                  "--plan_format", "json"])
    assert rc == 0, err
    plan = json.loads(out)
    jsonschema.validate(plan, schema)
    assert plan["steps"], name


def test_a_step_that_strays_from_its_class_is_caught_by_the_schema():
    with open(os.path.join(ROOT, "provision_agent", "schema", "plan-v1.json")) as f:
        schema = json.load(f)
    stray = {"layout": {}, "warnings": [], "steps": [
        {"kind": "mkfs", "description": "", "args": {"device": "/dev/vda1",
                                                       "fs_type": "ext4", "label": None,
                                                       "options": [], "volume_id": "x"}}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(stray, schema)
