"""A real run's preflight checks the disks the planning discovered moments before, instead of
discovering them a second time (udevadm settle and the probe: 0.7-0.9 s of every deploy in the
emulated ramdisk, issue 58), unless the run released mounts an earlier run left (their disks
were in use at the planning's discovery)."""

import types

import pytest

from provision_agent.cli import main
from provision_agent.drivers import mount
from provision_agent.machine import disks, image_tables, preflight
from provision_agent.run import apply

PLANNED = types.SimpleNamespace(steps=[], disk_names=["/dev/vda"])
SEEN = [{"name": "/dev/vda", "size": 1 << 32}]


@pytest.fixture
def calls(monkeypatch):
    calls = {"discover": 0}

    def discover(runner, loops=()):
        calls["discover"] += 1
        return [{"name": "/dev/vda", "size": 1 << 32, "fresh": True}]
    monkeypatch.setattr(disks, "discover", discover)
    monkeypatch.setattr(mount, "check_target_root", lambda *a: None)
    monkeypatch.setattr(preflight, "check",
                        lambda planned, live, runner: calls.setdefault("checked", live))
    monkeypatch.setattr(image_tables, "check", lambda *a: None)
    monkeypatch.setattr(apply, "_execute", lambda *a: {"steps": []})
    return calls


def run(monkeypatch, live_disks, stale=()):
    monkeypatch.setattr(mount, "release_stale", lambda runner, root: list(stale))
    conf = types.SimpleNamespace(target_root="/tmp/t", recovery_key_file=None)
    events = types.SimpleNamespace(result=lambda *a: None, close=lambda: None)
    apply.provision(PLANNED, conf, runner=object(), live_disks=live_disks, events=events)


def test_the_plans_own_discovery_is_checked_without_a_second_one(monkeypatch, calls):
    run(monkeypatch, SEEN)
    assert calls == {"discover": 0, "checked": SEEN}


def test_mounts_released_since_mean_a_fresh_discovery(monkeypatch, calls):
    run(monkeypatch, SEEN, stale=["/tmp/t/boot"])
    assert calls["discover"] == 1 and calls["checked"][0]["fresh"]


def test_without_the_plans_disks_they_are_discovered(monkeypatch, calls):
    run(monkeypatch, None)
    assert calls["discover"] == 1


def test_the_command_hands_its_live_disks_to_the_run_but_never_an_inventory(monkeypatch):
    given = []
    monkeypatch.setattr(apply, "provision",
                        lambda planned, conf, live_disks=None: given.append(live_disks) or {})
    monkeypatch.setattr(apply, "summary", lambda report: "")
    monkeypatch.setattr(main, "machine_disks", lambda conf, layout=None: SEEN)
    monkeypatch.setattr(main.pipeline, "load_layout", lambda doc, name: object())
    monkeypatch.setattr(main.pipeline, "build_plan", lambda *a, **k: PLANNED)
    monkeypatch.setattr(main.existing, "needed", lambda layout: False)
    monkeypatch.setattr(main.input_source, "read_input", lambda *a, **k: {})
    monkeypatch.setattr(main.render, "plan_text", lambda planned: "")
    for inventory, expected in ((None, SEEN), ("inv.json", None)):
        conf = types.SimpleNamespace(target_root="/tmp/provision-target", data_driver="native",
                                     input_data_file="x", input_data_url=None, dry_run=False,
                                     input_data_ca_bundle=None, input_data_insecure=False,
                                     image_keyring=None, inventory_file=inventory,
                                     plan_format="text", recovery_key_file=None)
        main.run("run", conf)
        assert given[-1] == expected
