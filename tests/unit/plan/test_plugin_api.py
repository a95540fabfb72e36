"""The plug-in API (provision_agent/api.py, docs/extending.md; issue 59): hook points, the
version a plug-in needs, failures naming the plug-in and its package, secret fields, and the
target's files written inside it (a link in the image pointing out never leads out)."""

import json
import logging
import os

import pytest

from provision_agent import api, redact
from provision_agent.errors import InputError
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline
from provision_agent.run.events import Events
from provision_agent.run.executor import Executor
from tests.plugins import example_vendor, harness
from tests.unit.fakes import FakeRunner
from tests.unit.helpers import inventory, run_cli, sample
from tests.unit.plan.test_validate import WHOLE_DISK

plugins = harness.plugins
LICENCE = "LIC-7f3a-91bd-secret"
AGENT = {"server": "mgmt.example", "licence_key": LICENCE}
PACKAGE = "plug-in 'vendor_raid' (package example-vendor-steps)"


def _doc(base=None, **sections):
    doc = sample("single-disk") if base is None else json.loads(json.dumps(base))
    doc["extensions"] = sections
    return doc


def _kinds(tmp_path, doc):
    rc, out, err = run_cli(tmp_path, doc, "three-disks", extra=["--plan_format", "json"])
    assert rc == 0, err
    return [s["kind"] for s in json.loads(out)["steps"]]


@pytest.mark.parametrize("phase,after,before", [
    ("first", None, "wipe"),
    ("after_partitioning", "settle", "pv_create"),
    ("after_filesystems", "mkfs", "mount"),
    ("after_image", "write_image", "fstab"),
    ("before_boot", "fstab", "bootloader"),
    ("after_boot", "bootloader", "umount"),
    ("in_target", "bootloader", "umount"),
    ("last", "umount", None),
])
def test_each_phase_runs_where_the_docs_say(tmp_path, plugins, monkeypatch, phase, after,
                                            before):
    monkeypatch.setattr(example_vendor.VendorAgent, "phase", phase)
    # uefi: LVM, a tar image unpacked into the mounted target, grub
    kinds = [None] + _kinds(tmp_path, _doc(sample("uefi"), vendor_agent=AGENT)) + [None]
    at = kinds.index("vendor_agent")
    assert (kinds[at - 1], kinds[at + 1]) == (after, before), kinds


@pytest.mark.parametrize("phase", ["after_image", "before_boot", "after_boot", "in_target"])
def test_a_whole_disk_image_plan_refuses_a_step_that_needs_the_root_mounted(
        tmp_path, plugins, monkeypatch, phase):
    monkeypatch.setattr(example_vendor.VendorAgent, "phase", phase)
    rc, out, err = run_cli(tmp_path, _doc(WHOLE_DISK, vendor_agent=AGENT), "three-disks")
    assert rc == 2, err
    assert ("$.extensions.vendor_agent: plug-in 'vendor_agent' (package example-vendor-steps):"
            f" its steps run in phase {phase!r}, with the new system's root filesystem mounted"
            in err), err


def test_a_whole_disk_image_plan_takes_a_step_run_before_the_wipe(tmp_path, plugins):
    raid = {"controller": "slot1", "volumes": [{"level": 1, "slots": [0, 1]}]}
    assert _kinds(tmp_path, _doc(WHOLE_DISK, vendor_raid=raid))[0] == "vendor_raid"


def _broken(tmp_path, monkeypatch, cls):
    harness.install_plugins(tmp_path, monkeypatch,
                            {"vendor_raid": f"tests.plugins.broken_vendor:{cls}"})
    raid = {"controller": "slot1", "volumes": [{"level": 1, "slots": [0, 1]}]}
    return _doc(vendor_raid=raid)


@pytest.mark.parametrize("cls,said", [
    ("BrokenValidate", f"$.extensions.vendor_raid: {PACKAGE} validate() failed: "
                       "KeyError: 'no_such_key'"),
    ("BrokenPlan", f"$.extensions.vendor_raid: {PACKAGE} plan() failed: "
                   "KeyError: 'no_such_key'"),
    ("NeedsApi2", f"$.extensions.vendor_raid: {PACKAGE} needs plug-in API version 2.0; this "
                  f"provision offers {api.API_VERSION}"),
])
def test_a_plugin_failing_before_any_write_is_exit_2_naming_it(tmp_path, monkeypatch, cls,
                                                               said):
    try:
        rc, out, err = run_cli(tmp_path, _broken(tmp_path, monkeypatch, cls), "three-disks")
    finally:
        harness.forget(["vendor_raid"])
    assert rc == 2 and said in err, (rc, err)
    assert "unexpected error" not in err


def test_a_plugin_run_that_raises_is_exit_4_naming_it_and_its_step(tmp_path, monkeypatch):
    try:
        doc = _broken(tmp_path, monkeypatch, "BrokenRun")
        layout = pipeline.load_layout(doc, "native")
        planned = pipeline.build_plan(layout, inv_mod.from_document(inventory("three-disks")))
        first = [s for s in planned.steps if s.kind == "vendor_raid"]
        with pytest.raises(api.PluginStepError) as caught:
            Executor(FakeRunner(), Events(), str(tmp_path / "t")).execute(first)
    finally:
        harness.forget(["vendor_raid"])
    assert caught.value.exit_code == 4
    assert str(caught.value) == (f"{PACKAGE} step 'RAID1 on controller slot1 over slots "
                                 "[0, 1]': RuntimeError: the controller said no")


class _Mounted:
    """Mounts whose stack says the target's root is mounted."""
    def __init__(self, root):
        self.stack = [root]


def test_target_writes_stay_inside_when_an_image_link_points_out(tmp_path):
    root, outside = tmp_path / "target", tmp_path / "ramdisk-etc"
    (root / "etc").mkdir(parents=True)
    outside.mkdir()
    (outside / "agent.conf").write_text("the ramdisk's own\n")
    # the image's /etc/vendor is an absolute link to the ramdisk's directory, and a relative
    # one climbs out by '..'
    os.symlink(str(outside), root / "etc" / "vendor")
    os.symlink("../../../../../../ramdisk-etc", root / "etc" / "climb")
    target = api.Target(FakeRunner(), str(root), _Mounted(str(root)))
    first = target.write_text("/etc/vendor/agent.conf", "server = a\n")
    second = target.write_text("/etc/climb/agent.conf", "server = b\n")
    assert (outside / "agent.conf").read_text() == "the ramdisk's own\n"
    assert first == str(root / outside.relative_to("/") / "agent.conf")
    assert second == str(root / "ramdisk-etc" / "agent.conf")
    assert target.read_text("/etc/vendor/agent.conf") == "server = a\n"
    assert target.read_text("/etc/climb/agent.conf") == "server = b\n"
    os.mkfifo(root / "fifo")
    with pytest.raises(api.TargetError, match="not a regular file"):
        target.read_bytes("/fifo")


def test_the_target_refuses_use_before_it_is_mounted(tmp_path):
    target = api.Target(FakeRunner(), str(tmp_path), _Mounted("/elsewhere"))
    with pytest.raises(api.TargetError, match="not mounted in this phase"):
        target.write_text("/etc/x", "")


def test_a_command_runs_inside_the_target_through_the_isolated_chroot(tmp_path):
    runner = FakeRunner()
    api.Target(runner, str(tmp_path), _Mounted(str(tmp_path))).run(["vendor-agent-enable"])
    (inside,) = [c for c in runner.calls if "vendor-agent-enable" in c]
    assert inside[:2] == ["unshare", "--mount"] and str(tmp_path) in inside
    assert any(c[:3] == ["umount", "--lazy", str(tmp_path / "dev")] for c in runner.calls)


def test_a_secret_field_is_redacted_in_plans_events_logs_and_errors(tmp_path, plugins,
                                                                   caplog):
    rc, out, err = run_cli(tmp_path, _doc(vendor_agent=AGENT), "three-disks",
                           extra=["--plan_format", "json"])
    assert rc == 0, err
    (step,) = [s for s in json.loads(out)["steps"] if s["kind"] == "vendor_agent"]
    assert step["args"]["licence_key"] == "<redacted>"
    assert step["description"] == "vendor agent for mgmt.example (licence <redacted>)"
    rc, text_plan, err2 = run_cli(tmp_path, _doc(vendor_agent=AGENT), "three-disks")
    layout = pipeline.load_layout(_doc(vendor_agent=AGENT), "native")
    planned = pipeline.build_plan(layout, inv_mod.from_document(inventory("three-disks")))
    events_file = tmp_path / "events.jsonl"
    events = Events([open(events_file, "w")])
    runner = FakeRunner(fail=["unshare"])
    (agent,) = [s for s in planned.steps if s.kind == "vendor_agent"]
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "vendor-agent-enable").write_text("")
    executor = Executor(runner, events, str(root))
    executor.mounts.stack.append(str(root))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(api.PluginStepError) as caught:
        executor.execute([agent])
    events.close()
    shown = [out, err, text_plan, err2, events_file.read_text(), redact.text(str(caught.value)),
             "\n".join(redact.Formatter().format(r) for r in caplog.records)]
    assert LICENCE in str(caught.value.cause)       # it really was there to hide
    for text in shown:
        assert LICENCE not in text
    assert "<redacted>" in shown[4] and "vendor_agent" in shown[4]


@pytest.mark.parametrize("cls,said", [
    ("BrokenPlan", f"$.extensions.vendor_raid: {PACKAGE} plan() failed: "
                   "KeyError: 'no_such_key'"),
    ("BrokenValidate", f"$.extensions.vendor_raid: {PACKAGE} validate() failed: "),
])
def test_a_conductor_without_an_inventory_runs_plan_too(tmp_path, monkeypatch, cls, said):
    """check_layout (the Ironic conductor's check when it has no recorded inventory) runs the
    plug-ins' plan() with placeholder devices: a plan() bug shows before anything boots."""
    try:
        layout = pipeline.load_layout(_broken(tmp_path, monkeypatch, cls), "native")
        with pytest.raises(InputError) as caught:
            pipeline.check_layout(layout)
    finally:
        harness.forget(["vendor_raid"])
    assert said in str(caught.value)


def test_plan_without_a_machine_sees_placeholder_devices(tmp_path, plugins):
    seen = {}
    original = example_vendor.VendorRaid.plan

    def spy(self, section, resolved):
        seen["device"] = resolved.devices["disk0"]
        return original(self, section, resolved)
    raid = {"controller": "slot1", "volumes": [{"level": 1, "slots": [0, 1]}]}
    layout = pipeline.load_layout(_doc(vendor_raid=raid), "native")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(example_vendor.VendorRaid, "plan", spy)
        pipeline.check_layout(layout)
    assert seen == {"device": "<disk0>"}
