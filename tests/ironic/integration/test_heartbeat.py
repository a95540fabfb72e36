"""A real Ironic learns where the ramdisk is from our agent's lookup and heartbeats.

Real: Ironic 39 (API + conductor), its ramdisk API and agent-token checks, our
provision-ironic-agent as a process (the one the ramdisk's init starts), the conductor's SSH
to a local sshd standing in for the ramdisk, `provision --dry_run` run there. No node has
driver_info/provision_ssh_address: the address, port and host key come from the heartbeat.
"""

import os
import subprocess
import sys
import time

import pytest
import requests

from provision_agent.agent.ironic import agent_version
from tests import REPO_ROOT
from tests.ironic import realenv

ROOT = REPO_ROOT
LAYOUT = os.path.join(ROOT, "samples", "single-disk.json")
INVENTORY = os.path.join(ROOT, "samples", "inventory", "single-disk.json")


@pytest.fixture(scope="module")
def ironic(ramdisk, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ironic-hb"))
    # A running job is looked at again only after running_poll_interval: a deploy that ends
    # within the tests' timeouts got its last look from the agent's "job exited" heartbeat.
    server = realenv.Ironic(workdir, dict(realenv.dry_run_options(ramdisk, workdir, INVENTORY),
                                         data_driver="native", running_poll_interval=600))
    server.remote_dir = os.path.join(workdir, "remote")
    server.start()
    yield server
    server.stop()


class AgentProcess:
    """provision-ironic-agent on this host, told the MAC and address a ramdisk would find;
    it binds the local sshd to its node in binding_dir (the conductor's, realenv.Ironic's)."""

    def __init__(self, tmp_path, api_url, mac, ssh_port, host_key_file, binding_dir,
                 job_dir=None):
        cmdline = tmp_path / "cmdline"
        cmdline.write_text(f"console=ttyS0 ipa-api-url={api_url} rdinit=/init\n")
        self.log = tmp_path / "agent.log"
        self.argv = [realenv.bin_path("provision-ironic-agent") or sys.executable,
                     "--cmdline_file", str(cmdline), "--mac", mac, "--address", "127.0.0.1",
                     "--ssh_port", str(ssh_port), "--host_key_file", host_key_file,
                     "--binding_dir", binding_dir, "--interval", "2"]
        self.argv += ["--job_dir", job_dir] if job_dir else []

    def __enter__(self):
        self.out = open(self.log, "w")
        self.proc = subprocess.Popen(self.argv, stdout=self.out, stderr=subprocess.STDOUT)
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(10)
        self.out.close()

    def text(self):
        return self.log.read_text()


HEARTBEAT_EVERY = 10   # seconds between the hand-made heartbeats (Ironic's agents: 5-300)


def _enroll(ironic, name, mac, driver_info=None):
    with open(LAYOUT) as f:
        import json
        layout = json.load(f)
    return ironic.enroll(name, driver_info or {},
                         {"image_source": "http://127.0.0.1:9/image.qcow2",
                          "provision_layout": layout}, macs=[mac])


def test_heartbeat_tells_the_conductor_where_and_which_key(ironic, ramdisk, tmp_path):
    mac = "52:54:00:aa:00:01"
    uuid = _enroll(ironic, "hb-good", mac)
    with AgentProcess(tmp_path, ironic.ramdisk_api_url, mac, ramdisk.port,
                      ramdisk.host_key_file + ".pub", ironic.binding_dir,
                      ironic.remote_dir) as agent:
        ironic.set_state(uuid, "active")
        node = ironic.wait_state(uuid, ["active", "deploy failed"], 90)
        assert node["provision_state"] == "active", (node["last_error"], agent.text())
    dii = node["driver_internal_info"]
    assert dii["provision_exit_code"] == 0
    assert dii["provision_ssh_address"] == "127.0.0.1"
    assert dii["provision_ssh_port"] == ramdisk.port
    assert dii["provision_host_key"] == ramdisk.host_key
    assert dii["provision_heartbeats"] >= 1
    assert "provision_ssh_address" not in node["driver_info"]
    log = agent.text()
    assert f"this machine is node {uuid}" in log
    assert "Heartbeat for node" in log and "accepted" in log
    # Within 90 s although running_poll_interval is 600: the exit was heartbeated.
    assert "it said the job exited" in log
    # The token is Ironic's secret between the lookup and the heartbeats: never logged.
    assert "agent_token" not in log and "******" not in log
    # The conductor logged the key it pinned, by fingerprint.
    assert f"Node {uuid}: ramdisk (agent" in ironic.log_text()


def test_a_ramdisk_presenting_another_key_than_it_reported_is_refused(ironic, ramdisk,
                                                                      tmp_path):
    mac = "52:54:00:aa:00:02"
    other = tmp_path / "other_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
                   check=True)
    uuid = _enroll(ironic, "hb-otherkey", mac)
    with AgentProcess(tmp_path, ironic.ramdisk_api_url, mac, ramdisk.port,
                      str(other) + ".pub", ironic.binding_dir,
                      ironic.remote_dir):
        ironic.set_state(uuid, "active")
        node = ironic.wait_state(uuid, ["active", "deploy failed"], 90)
    assert node["provision_state"] == "deploy failed"
    assert "refusing the ramdisk" in node["last_error"], node["last_error"]
    assert "provision_exit_code" not in node["driver_internal_info"]   # provision never ran


def test_no_heartbeat_means_no_ssh_and_the_wait_says_why(ironic):
    uuid = _enroll(ironic, "hb-silent", "52:54:00:aa:00:03")
    ironic.set_state(uuid, "active")
    node = realenv.wait_for(
        lambda: (lambda n: n if n["driver_internal_info"].get("provision_last_ssh_error")
                 else None)(ironic.node(uuid)), 30, what="the waiting reason")
    assert node["provision_state"] == "wait call-back"
    assert "no heartbeat from the ramdisk yet" in \
        node["driver_internal_info"]["provision_last_ssh_error"]
    ironic.set_state(uuid, "deleted")
    ironic.wait_state(uuid, ["available", "deploy failed", "error"], 60)


def _lookup(ironic, mac, headers):
    """A lookup as an agent makes it: again while the node is locked (Ironic answers 409 and
    does not wait for the lock itself: a conductor task still holds it after the node reached
    wait call-back, for longer on a loaded machine)."""
    def answer():
        got = requests.get(f"{ironic.url}/v1/lookup", params={"addresses": mac},
                           headers=headers, timeout=10)
        return None if got.status_code == 409 else got
    got = realenv.wait_for(answer, 30, interval=0.5, what="a lookup the node's lock lets by")
    assert got.status_code == 200, got.text
    return got


def test_token_is_handed_out_once_and_required(ironic, ramdisk, tmp_path):
    mac = "52:54:00:aa:00:04"
    uuid = _enroll(ironic, "hb-token", mac)
    ironic.set_state(uuid, "active")
    ironic.wait_state(uuid, ["wait call-back"], 30)
    headers = {"X-OpenStack-Ironic-API-Version": "1.68"}
    first = _lookup(ironic, mac, headers)
    second = _lookup(ironic, mac, headers)
    assert first.json()["config"]["agent_token"] not in (None, "******")
    assert second.json()["config"]["agent_token"] == "******"
    forged = requests.post(f"{ironic.url}/v1/heartbeat/{uuid}", headers=headers, timeout=10,
                           json={"callback_url": "http://192.0.2.66:22",
                                 "agent_token": "guessed", "agent_version": "x",
                                 "agent_verify_ca": ramdisk.host_key})
    assert forged.status_code == 400, forged.text
    node = ironic.node(uuid)
    assert "provision_ssh_address" not in node["driver_internal_info"]
    # The agent that comes second is told why it cannot go on, and keeps trying.
    with AgentProcess(tmp_path, ironic.ramdisk_api_url, mac, ramdisk.port,
                      ramdisk.host_key_file + ".pub", ironic.binding_dir,
                      ironic.remote_dir) as agent:
        realenv.wait_for(lambda: "handed its agent token to an earlier lookup" in agent.text(),
                         30, what="the agent's explanation")
    ironic.set_state(uuid, "deleted")
    ironic.wait_state(uuid, ["available", "deploy failed", "error"], 60)


def _heartbeat_until_heard(ironic, uuid, headers, body, states, timeout):
    """Heartbeat as a ramdisk does, every few seconds, until the node reaches one of states
    (the node then, once its timeout ran out TimeoutError): a heartbeat that comes while the
    conductor holds the node's lock is not recorded ("the next one will be"), and one post
    alone lost that race beside the e2e suite's VMs (2026-11-29)."""
    deadline = time.monotonic() + timeout
    while True:
        sent = requests.post(f"{ironic.url}/v1/heartbeat/{uuid}", headers=headers,
                             timeout=10, json=body)
        assert sent.status_code == 202, sent.text     # Ironic takes it: the token is right
        try:
            return ironic.wait_state(uuid, states,
                                     min(HEARTBEAT_EVERY, deadline - time.monotonic()))
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise


def test_a_heartbeat_naming_another_nodes_ramdisk_gets_nothing_sent_there(ironic, ramdisk,
                                                                          tmp_path):
    """Whoever won node A's agent token (a lookup by A's MAC while A boots) heartbeats for A
    with ramdisk B's address and B's host key, both public. B is a real ramdisk, bound by its
    agent to node B: the conductor must find that out over SSH and send B nothing of A's."""
    mac_a, mac_b = "52:54:00:aa:00:05", "52:54:00:aa:00:06"
    node_a = _enroll(ironic, "hb-victim-a", mac_a)
    node_b = _enroll(ironic, "hb-ramdisk-b", mac_b)
    with AgentProcess(tmp_path, ironic.ramdisk_api_url, mac_b, ramdisk.port,
                      ramdisk.host_key_file + ".pub", ironic.binding_dir,
                      ironic.remote_dir) as agent_b:
        ironic.set_state(node_b, "active")
        done_b = ironic.wait_state(node_b, ["active", "deploy failed"], 90)
        assert done_b["provision_state"] == "active", (done_b["last_error"], agent_b.text())
        ironic.set_state(node_a, "active")
        ironic.wait_state(node_a, ["wait call-back"], 30)
        headers = {"X-OpenStack-Ironic-API-Version": "1.68"}
        token_a = _lookup(ironic, mac_a, headers).json()["config"]["agent_token"]
        # a ceiling, not a speed: 25 s alone, over 60 s beside the e2e suite's two VMs
        node = _heartbeat_until_heard(
            ironic, node_a, headers,
            {"callback_url": f"https://127.0.0.1:{ramdisk.port}", "agent_token": token_a,
             "agent_version": agent_version(), "agent_verify_ca": ramdisk.host_key},
            ["active", "deploy failed"], 180)
    assert node["provision_state"] == "deploy failed"
    assert "refusing the ramdisk at 127.0.0.1" in node["last_error"], node["last_error"]
    assert f"not the ramdisk that looked up node {node_a}" in node["last_error"]
    assert token_a not in node["last_error"]
    assert "provision_exit_code" not in node["driver_internal_info"]
    # Nothing of A's reached B: no job directory, so no document and no provision run.
    assert not os.path.exists(os.path.join(ironic.remote_dir, node_a))
    assert os.path.exists(os.path.join(ironic.remote_dir, node_b, "input.json"))


def test_a_ramdisk_too_old_for_the_conductor(ironic, ramdisk, tmp_path):
    """A heartbeat from an agent built before provision-dispatch ("0.1.0", no protocol): with
    ramdisk_commands (PROVISION_TEST_RAMDISK_COMMANDS=1) the deploy fails at once naming both
    versions and what to do, nothing sent; without, the conductor speaks shell as before and
    looks at the ramdisk (whose binding this hand-made heartbeat lacks: refused there)."""
    mac = "52:54:00:aa:00:07"
    uuid = _enroll(ironic, "hb-old-agent", mac)
    ironic.set_state(uuid, "active")
    ironic.wait_state(uuid, ["wait call-back"], 30)
    headers = {"X-OpenStack-Ironic-API-Version": "1.68"}
    token = _lookup(ironic, mac, headers).json()["config"]["agent_token"]
    node = _heartbeat_until_heard(
        ironic, uuid, headers,
        {"callback_url": f"https://127.0.0.1:{ramdisk.port}", "agent_token": token,
         "agent_version": "0.1.0", "agent_verify_ca": ramdisk.host_key},
        ["active", "deploy failed"], 120)
    assert node["provision_state"] == "deploy failed"
    if ramdisk.forced:
        assert node["last_error"].startswith(
            "the ramdisk's agent is '0.1.0' (no dispatcher protocol), older than this "
            "conductor's provision "), node["last_error"]
        assert "rebuild the ramdisk" in node["last_error"]
        assert "provision_ssh_address" not in node["driver_internal_info"]
    else:
        assert f"not the ramdisk that looked up node {uuid}" in node["last_error"]
    assert not os.path.exists(os.path.join(ironic.remote_dir, uuid))
