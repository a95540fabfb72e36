"""A provision that takes a while: the conductor must start it, let go, and follow it.

`provision --dry_run` (test_integration.py) exits at once, which hid a start command that
waited for provision to exit: there the node showed phase "running" only after it was over.
Here a fake provision writes an event, sleeps, writes another; three nodes must all be seen
running at the same time, with the first event already recorded, before any of them exits.
"""

import os
import time

import pytest

from tests import REPO_ROOT
from tests.ironic import realenv

ROOT = REPO_ROOT
SLEEP = 8
FAKE = f"""#!/bin/sh
while [ $# -gt 0 ]; do
    case "$1" in --events_file) events="$2"; shift;; esac
    shift
done
echo '{{"event": "fake", "status": "begin"}}' >>"$events"
sleep {SLEEP}
echo '{{"event": "fake", "status": "end"}}' >>"$events"
exit 0
"""


@pytest.fixture(scope="module")
def ironic(ramdisk, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ironic-slow"))
    with realenv.with_script_provision(ramdisk, workdir, FAKE) as server:
        yield server


def _running_with_first_event(node):
    dii = node["driver_internal_info"] or {}
    seen = [(e.get("event"), e.get("status")) for e in dii.get("provision_events") or []]
    return (node["provision_state"] == "wait call-back"
            and dii.get("provision_phase") == "running"
            and "provision_exit_code" not in dii and ("fake", "begin") in seen)


def test_three_slow_provisions_run_at_once_and_are_followed(ironic, ramdisk):
    import json
    with open(os.path.join(ROOT, "samples", "single-disk.json")) as f:
        layout = json.load(f)
    uuids = [ironic.enroll(f"slow{i}", {
        "provision_ssh_address": "127.0.0.1", "provision_ssh_port": ramdisk.port,
        "provision_host_key": ramdisk.host_key,
    }, {"image_source": "http://127.0.0.1:9/i", "provision_layout": layout})
        for i in range(3)]
    t0 = time.monotonic()
    for uuid in uuids:
        ironic.set_state(uuid, "active")
    all_running_at = None
    while time.monotonic() - t0 < SLEEP + 60:
        nodes = [ironic.node(u) for u in uuids]
        if all(_running_with_first_event(n) for n in nodes):
            all_running_at = time.monotonic() - t0
            break
        if any(n["provision_state"] in ("active", "deploy failed") for n in nodes):
            break
        time.sleep(0.3)
    # Seen together, each running with no exit code yet: their provisions overlapped.
    assert all_running_at is not None, [
        (n["provision_state"], n["driver_internal_info"]) for n in nodes]
    for uuid in uuids:
        node = ironic.wait_state(uuid, ["active", "deploy failed"], SLEEP + 60)
        assert node["provision_state"] == "active", node["last_error"]
        events = node["driver_internal_info"]["provision_events"]
        assert [(e["event"], e["status"]) for e in events] == [
            ("wrapper", "started"), ("fake", "begin"), ("fake", "end"), ("wrapper", "exited")]


@pytest.fixture(scope="module")
def impatient_ironic(ramdisk, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ironic-impatient"))
    server = realenv.Ironic(workdir, {
        "ssh_private_key_file": ramdisk.client_key_file,
        # deploy_timeout is ten connect_timeouts: beside CI's VMs the conductor's first poll
        # came so late that an 8 s deadline left room for one attempt only (2026-11-29)
        "poll_interval": 1, "deploy_timeout": 20, "connect_timeout": 2, "command_timeout": 5,
        "data_driver": "native", "provision_command": "/bin/true",
        "remote_dir": os.path.join(workdir, "remote"),
    })
    server.start()
    yield server
    server.stop()


def test_a_ramdisk_that_never_answers_fails_after_deploy_timeout(impatient_ironic, ramdisk):
    """Its polls time out in a worker each; the deploy fails with the last SSH error."""
    import json
    silent = realenv.Silent()
    try:
        with open(os.path.join(ROOT, "samples", "single-disk.json")) as f:
            layout = json.load(f)
        uuid = impatient_ironic.enroll("mute", {
            "provision_ssh_address": "127.0.0.1", "provision_ssh_port": silent.port,
            "provision_host_key": ramdisk.host_key,
        }, {"image_source": "http://127.0.0.1:9/i", "provision_layout": layout})
        t0 = time.monotonic()
        impatient_ironic.set_state(uuid, "active")
        node = impatient_ironic.wait_state(uuid, ["active", "deploy failed"], 60)
        took = time.monotonic() - t0
    finally:
        silent.stop()
    assert node["provision_state"] == "deploy failed"
    assert "s ([provision_agent]deploy_timeout is 20 s; phase wait_ramdisk)" \
        in node["last_error"], node["last_error"]
    # paramiko words it "Error reading SSH protocol banner" or "No existing session"
    assert "last SSH error: SSHException: " in node["last_error"], node["last_error"]
    assert len(silent.held) >= 2          # it kept trying, one connect_timeout per poll
    assert 20 <= took < 45, took


# Ironic's own callback timeout, short, with its own timeout check running: a provision that
# keeps reporting outlives it, a silent one fails by it with the reason.
CALLBACK = 12
CHATTY = """#!/bin/sh
while [ $# -gt 0 ]; do
    case "$1" in --events_file) events="$2"; shift;; esac
    shift
done
i=0
while [ $i -lt $ROUNDS ]; do
    echo '{"event": "progress", "round": '$i'}' >>"$events"
    sleep 2
    i=$((i + 1))
done
exit 0
"""


@pytest.fixture(scope="module")
def callback_ironic(ramdisk, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ironic-callback"))
    for name, rounds in (("chatty", 15), ("silent", 0)):
        with open(os.path.join(workdir, name), "w") as f:
            f.write(CHATTY.replace("$ROUNDS", str(rounds)).replace(
                "exit 0", "exit 0" if rounds else "sleep 120"))
        os.chmod(os.path.join(workdir, name), 0o755)
    # which stand-in runs is chosen per node by the job directory's name
    chooser = os.path.join(workdir, "provision")
    with open(chooser, "w") as f:
        f.write(f"""#!/bin/sh\nexec {workdir}/$(cat ../kind-${{PWD##*/}}) "$@"\n""")
    os.chmod(chooser, 0o755)
    server = realenv.Ironic(workdir, {
        "ssh_private_key_file": ramdisk.client_key_file,
        "poll_interval": 1, "connect_timeout": 2, "command_timeout": 5,
        "data_driver": "native", "provision_command": chooser,
        "remote_dir": os.path.join(workdir, "remote"),
    }, extra_conf=f"[conductor]\ndeploy_callback_timeout = {CALLBACK}\n"
                  "check_provision_state_interval = 5\n")
    server.remote_dir = os.path.join(workdir, "remote")
    server.start()
    yield server
    server.stop()


def _deploy_kind(ironic, ramdisk, name, kind):
    import json
    with open(os.path.join(ROOT, "samples", "single-disk.json")) as f:
        layout = json.load(f)
    uuid = ironic.enroll(name, {
        "provision_ssh_address": "127.0.0.1", "provision_ssh_port": ramdisk.port,
        "provision_host_key": ramdisk.host_key,
    }, {"image_source": "http://127.0.0.1:9/i", "provision_layout": layout})
    os.makedirs(ironic.remote_dir, exist_ok=True)
    with open(os.path.join(ironic.remote_dir, f"kind-{uuid}"), "w") as f:
        f.write(kind)
    ironic.set_state(uuid, "active")
    return uuid


def test_progress_outlives_ironics_callback_timeout_and_silence_does_not(callback_ironic,
                                                                        ramdisk):
    chatty = _deploy_kind(callback_ironic, ramdisk, "chatty", "chatty")
    silent = _deploy_kind(callback_ironic, ramdisk, "silent", "silent")
    t0 = time.monotonic()
    failed = callback_ironic.wait_state(silent, ["active", "deploy failed"], CALLBACK + 40)
    assert failed["provision_state"] == "deploy failed"
    assert f"([conductor]deploy_callback_timeout is {CALLBACK} s; phase running)" \
        in failed["last_error"], failed["last_error"]
    done = callback_ironic.wait_state(chatty, ["active", "deploy failed"], 90)
    took = time.monotonic() - t0
    assert done["provision_state"] == "active", done["last_error"]
    # 15 rounds of 2 s: well past the 12 s Ironic would have allowed without progress
    assert took > 2 * CALLBACK, took
    assert done["driver_internal_info"]["provision_events_count"] >= 15
