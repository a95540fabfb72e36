"""Hardware plug-ins (provision_agent/run/hardware.py, plug-in API 1.1): `provision steps`
lists the Ironic steps the plug-ins that support this machine offer, ranked as
ironic-python-agent ranks hardware managers; `provision step` runs one after checking its
arguments; a plug-in's erase_device and inventory override provision's own."""

import contextlib
import io
import json

import pytest

from provision_agent.cli import hardware_commands
from provision_agent.cli import main as cli
from provision_agent.errors import CommandError
from provision_agent.plan import extensions
from provision_agent.run import erase, hardware
from provision_agent.run.events import Events
from tests.plugins.harness import install_plugins
from tests.unit.helpers import inventory

PLUGINS = {"generic": "tests.plugins.example_hardware:Generic",
           "specific": "tests.plugins.example_hardware:Specific"}


@pytest.fixture
def installed(tmp_path, monkeypatch):
    install_plugins(tmp_path, monkeypatch, PLUGINS, package="acme-hw",
                    namespace=hardware.NAMESPACE)


def _cli(tmp_path, *argv, inv="three-disks"):
    path = tmp_path / "inventory.json"
    path.write_text(json.dumps(inventory(inv)))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([*argv, "--inventory_file", str(path)] if argv[0] == "steps" else argv)
    return rc, out.getvalue(), err.getvalue()


def test_steps_lists_the_higher_ranked_plugins_step_with_its_arguments(tmp_path, installed):
    events = tmp_path / "events.jsonl"
    rc, out, err = _cli(tmp_path, "steps", "--events_file", str(events))
    assert rc == 0, err
    listing = json.loads(out)
    assert [(h["plugin"], h["support"]) for h in listing["hardware"]] == [("specific", 3),
                                                                          ("generic", 1)]
    tune = next(s for s in listing["steps"] if s["step"] == "vendor_tune")
    assert (tune["plugin"], tune["priority"], tune["types"]) == ("specific", 5,
                                                                 ["clean", "service"])
    assert tune["interface"] == "deploy"
    assert tune["argsinfo"] == {"level": {"description": "how hard", "required": True}}
    said = [json.loads(line) for line in events.read_text().splitlines()]
    assert said[0]["event"] == "steps" and said[0]["steps"] == listing["steps"]
    assert said[-1]["status"] == "ok"


def test_a_plugin_that_does_not_support_the_machine_offers_nothing(tmp_path, installed):
    rc, out, err = _cli(tmp_path, "steps", inv="single-disk")    # no /dev/vdb: not specific's
    assert rc == 0, err
    listing = json.loads(out)
    assert [h["plugin"] for h in listing["hardware"]] == ["generic"]
    assert [(s["step"], s["plugin"]) for s in listing["steps"]] == [("vendor_tune", "generic")]


def _step(tmp_path, monkeypatch, request, inv="three-disks", extra=()):
    monkeypatch.setattr(hardware_commands, "own_inventory",
                        lambda conf: {"disks": inventory(inv)["inventory"]["disks"]})
    path = tmp_path / "step.json"
    path.write_text(json.dumps(request))
    events = tmp_path / "events.jsonl"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["step", "--input_data_file", str(path), "--events_file", str(events),
                       *extra])
    said = [json.loads(line) for line in events.read_text().splitlines()] \
        if events.exists() else []
    return rc, out.getvalue(), err.getvalue(), said


def test_step_runs_the_higher_ranked_plugins_step(tmp_path, monkeypatch, installed):
    rc, out, err, said = _step(tmp_path, monkeypatch, {"step": "vendor_tune", "type": "clean",
                                                       "args": {"level": 2}})
    assert rc == 0, err
    assert json.loads(out)["result"] == {"by": "specific", "level": 2, "disks": 3}
    assert [(e.get("kind"), e.get("status")) for e in said] == [
        ("vendor_tune", "start"), ("vendor_tune", "done"), (None, "ok")]


@pytest.mark.parametrize("request_, says", [
    ({"step": "vendor_tune", "args": {"level": 9}}, "$.args.level: 9 is greater than"),
    ({"step": "vendor_tune", "args": {}}, "'level' is a required property"),
    ({"step": "vendor_tune", "type": "deploy", "args": {"level": 1}},
     "$.type: step 'vendor_tune' of plug-in 'specific' (package acme-hw) is not a deploy step"),
    ({"step": "no_such", "args": {}}, "$.step: no hardware plug-in supporting this machine "
                                      "offers a step 'no_such' (offered: vendor_fail, "
                                      "vendor_tune)"),
    ({"step": "vendor_tune", "oops": 1}, "the step input is"),
])
def test_a_bad_request_is_refused_before_anything_runs(tmp_path, monkeypatch, installed,
                                                       request_, says):
    rc, _out, err, said = _step(tmp_path, monkeypatch, request_)
    assert rc == 2 and says in err, err
    assert not [e for e in said if e.get("event") == "step"]


def test_a_failing_step_names_the_plugin_and_keeps_the_commands_exit_code(tmp_path, monkeypatch,
                                                                          installed):
    rc, _out, err, said = _step(tmp_path, monkeypatch, {"step": "vendor_fail", "args": {}})
    assert rc == 4, err
    assert "plug-in 'specific' (package acme-hw) step 'always fails': command 'false'" in err
    assert said[-2]["status"] == "failed" and said[-1]["exit_code"] == 4


@pytest.mark.parametrize("name, says", [
    ("old", "hardware plug-ins need plug-in API 1.1 or later (it says 1.0"),
])
def test_a_plugin_written_for_api_1_0_is_refused_naming_it(tmp_path, monkeypatch, name, says):
    install_plugins(tmp_path, monkeypatch, {name: "tests.plugins.example_hardware:Old"},
                    package="old-hw", namespace=hardware.NAMESPACE)
    rc, _out, err = _cli(tmp_path, "steps")
    assert rc == 2 and f"plug-in 'old' (package old-hw): {says}" in err, err


def test_a_plugin_whose_supports_raises_is_left_out(tmp_path, monkeypatch):
    install_plugins(tmp_path, monkeypatch, {"broken": "tests.plugins.example_hardware:Broken"},
                    package="broken-hw", namespace=hardware.NAMESPACE)
    rc, out, err = _cli(tmp_path, "steps")
    assert rc == 0 and json.loads(out) == {"hardware": [], "steps": []}, err


def test_a_full_erase_uses_the_plugins_own_erase_of_a_disk(monkeypatch, installed, tmp_path):
    from provision_agent.drivers import wipe
    from provision_agent.run import secure_erase
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    monkeypatch.setattr(secure_erase, "erase_disk", lambda *a, **k: pytest.fail("not ours"))
    from tests.unit.run.test_erase import DISKS, runner
    r = runner()
    report = erase.erase({"method": "full"}, r, Events([]), disks=DISKS[:2], mounted={},
                         swaps=[])    # /dev/vdb (read-only, left alone) makes it specific's
    assert report["methods"] == {"/dev/vda": "specific: the controller's own secure erase"}
    assert ["vendor-secure-erase", "/dev/vda"] in r.calls


def test_a_plugin_erase_that_fails_fails_the_erase_naming_it(monkeypatch, installed):
    from provision_agent.drivers import wipe
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    from tests.unit.run.test_erase import DISKS, runner
    with pytest.raises(CommandError, match=r"plug-in 'specific' \(package acme-hw\) "
                                           r"erase_device"):
        erase.erase({"method": "express"}, runner(fail=("vendor-secure-erase",)),
                    Events([]), disks=DISKS[:2], mounted={}, swaps=[])


def test_the_loaded_plugins_are_named_by_their_package(installed):
    hardware.supported({"disks": []})
    assert extensions.package("generic") == "acme-hw"


def test_a_dry_run_checks_the_step_and_runs_nothing(tmp_path, monkeypatch, installed):
    rc, out, err, said = _step(tmp_path, monkeypatch, {"step": "vendor_fail", "args": {}},
                               extra=["--dry_run"])
    assert rc == 0, err
    assert json.loads(out) == {"step": "vendor_fail", "type": "clean", "plugin": "specific",
                               "dry_run": True}
    assert not [e for e in said if e.get("event") == "step"]
