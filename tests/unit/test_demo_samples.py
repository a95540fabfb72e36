"""Every sample, as scripts/demo sees it: its format recognised and a plan on the demo VM's disks
(serials disk0..2, as samples/inventory/three-disks.json records them), or a clear reason before
anything boots. A new sample must land in one of the two lists."""

import json

import pytest

from tests.unit.helpers import SAMPLES, run_cli
from tests.vmbench import demo

# These download images from the bench's HTTP server; the demo says so and stops.
NEEDS_IMAGES = {"ironic-layout", "ironic-partition-image", "ironic-whole-disk", "provision",
                "provision-vm"}
ALL = sorted(p.stem for p in SAMPLES.glob("*.json"))


def test_every_sample_is_classified():
    assert NEEDS_IMAGES < set(ALL)


@pytest.mark.parametrize("name", ALL)
def test_demo_plans_every_sample_it_runs(tmp_path, name):
    document, why = demo.load(SAMPLES / f"{name}.json")
    if name in NEEDS_IMAGES:
        assert document is None and "does not serve yet" in why
        return
    assert why is None
    driver = demo.detect.guess_driver(document)
    rc, out, err = run_cli(tmp_path, document, "three-disks", extra=["--data_driver", driver])
    assert rc == 0, err
    assert "Plan (" in out


def test_a_relative_layout_is_the_callers(monkeypatch, tmp_path):
    monkeypatch.setenv("DEMO_CWD", str(SAMPLES))
    assert demo.resolve_layout("single-disk.json") == SAMPLES / "single-disk.json"
    assert demo.main(["--check", "single-disk.json"]) == 0
    assert demo.main(["--check", "nope.json"]) == 2
