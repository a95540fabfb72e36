"""A real Ironic deploys nodes with our interface; the "ramdisk" is a local sshd that runs
the real `provision --dry_run`."""

import json
import os

import pytest

from tests import REPO_ROOT
from tests.ironic import realenv

ROOT = REPO_ROOT
LAYOUT = os.path.join(ROOT, "samples", "single-disk.json")
INVENTORY = os.path.join(ROOT, "samples", "inventory", "single-disk.json")


@pytest.fixture(scope="module")
def ironic(ramdisk, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ironic"))
    server = realenv.Ironic(workdir, dict(realenv.dry_run_options(ramdisk, workdir, INVENTORY),
                                         data_driver="native"))
    server.start()
    yield server
    server.stop()


def _layout(**disk_match):
    with open(LAYOUT) as f:
        layout = json.load(f)
    if disk_match:
        layout["disks"][0]["match"] = disk_match
    return layout


def _enroll(ironic, ramdisk, name, layout, host_key=None):
    return ironic.enroll(name, {
        "provision_ssh_address": "127.0.0.1",
        "provision_ssh_port": ramdisk.port,
        "provision_host_key": host_key or ramdisk.host_key,
    }, {"image_source": "http://127.0.0.1:9/image.qcow2", "provision_layout": layout})


def test_conductor_loaded_the_interface(ironic):
    loaded = [line for line in ironic.log_text().splitlines()
              if "Loaded the following deploy interfaces" in line]
    assert loaded and "'provision'" in loaded[-1], loaded


def test_deploy_to_active_and_undeploy(ironic, ramdisk):
    uuid = _enroll(ironic, ramdisk, "good", _layout())
    ironic.set_state(uuid, "active")
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 90)
    assert node["provision_state"] == "active", node["last_error"]
    assert node["last_error"] is None
    assert node["power_state"] == "power on"
    dii = node["driver_internal_info"]
    assert dii["provision_exit_code"] == 0
    assert dii["provision_phase"] == "done"
    events = dii["provision_events"]
    assert [e["status"] for e in events if e["event"] == "wrapper"] == ["started", "exited"]
    assert events[-1]["exit_code"] == 0
    assert dii["provision_events_count"] == len(events)
    # The plan provision printed in the "ramdisk" proves it read the layout we uploaded.
    out = os.path.join(ironic_remote(ironic), uuid, "output.log")
    with open(out) as f:
        plan = f.read()
    assert "Plan (11 steps)" in plan and "/dev/vda3" in plan
    ironic.set_state(uuid, "deleted")
    node = ironic.wait_state(uuid, ["available", "error"], 60)
    assert node["provision_state"] == "available", node["last_error"]
    assert node["power_state"] == "power off"


def ironic_remote(ironic):
    for line in open(ironic.conf):
        if line.startswith("remote_dir"):
            return line.split("=", 1)[1].strip()
    raise AssertionError("no remote_dir in ironic.conf")


def test_machine_mismatch_fails_with_log_tail(ironic, ramdisk):
    uuid = _enroll(ironic, ramdisk, "mismatch", _layout(name="/dev/vdz"))
    ironic.set_state(uuid, "active")
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 90)
    assert node["provision_state"] == "deploy failed"
    assert "provision exited with 3" in node["last_error"]
    assert "/dev/vdz" in node["last_error"]        # provision's own error line, from its log
    assert node["driver_internal_info"]["provision_exit_code"] == 3


def test_invalid_layout_is_refused_before_booting(ironic, ramdisk):
    layout = _layout()
    layout["filesystems"][0]["type"] = "no-such-fs"
    uuid = _enroll(ironic, ramdisk, "invalid", layout)
    resp = ironic.set_state(uuid, "active", ok=False)
    assert resp.status_code == 400
    assert "provision rejects" in resp.text
    node = ironic.node(uuid)
    assert node["provision_state"] == "available"
    assert "provision_phase" not in node["driver_internal_info"]    # never powered into the ramdisk


def test_unpinned_host_key_fails_the_deploy(ironic, ramdisk):
    other = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"
    uuid = _enroll(ironic, ramdisk, "wrongkey", _layout(), host_key=other)
    ironic.set_state(uuid, "active")
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 60)
    assert node["provision_state"] == "deploy failed"
    assert "refusing the ramdisk" in node["last_error"]
    assert "provision_exit_code" not in node["driver_internal_info"]
