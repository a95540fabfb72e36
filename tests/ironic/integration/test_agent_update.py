"""A real Ironic with [provision_agent]agent_update_wheel deploys onto forced stand-in ramdisks
whose provision says it is 0.0.1 (older than this conductor's): one holding the update key is
updated in place before the job starts and the deploy completes; one holding another key
refuses the push and the deploy fails with its reason; nothing runs there (issue 60)."""

import importlib.metadata
import os
import subprocess
import zipfile

import pytest

from tests.ironic import realenv
from tests.ironic.conftest import require
from tests.ironic.integration.test_deploy import INVENTORY, _enroll, _layout

OURS = importlib.metadata.version("provision-agent")
NAMESPACE = "provision-agent-update"


def keypair(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path], check=True)
    return path


def wheel_of_this_tree(work):
    """This tree's provision_agent as a wheel of the conductor's own version."""
    wheel = os.path.join(work, f"provision_agent-{OURS}-py3-none-any.whl")
    with zipfile.ZipFile(wheel, "w") as z:
        for top, dirs, files in os.walk(os.path.join(realenv.REPO, "provision_agent")):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if name.endswith(".py"):
                    z.write(os.path.join(top, name),
                            os.path.relpath(os.path.join(top, name), realenv.REPO))
        z.writestr(f"provision_agent-{OURS}.dist-info/METADATA",
                   f"Metadata-Version: 2.1\nName: provision-agent\nVersion: {OURS}\n")
    return wheel


def old_stand_in(work, name, signer_pub, remote, binding_dir):
    """A forced stand-in whose provision-agent metadata says 0.0.1 (a directory before this
    tree on its path), taking updates signed by signer_pub's key."""
    old = os.path.join(work, name + "-old")
    os.makedirs(os.path.join(old, "provision_agent-0.0.1.dist-info"))
    with open(os.path.join(old, "provision_agent-0.0.1.dist-info", "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: provision-agent\nVersion: 0.0.1\n")
    root = os.path.join(work, name + "-update")
    os.makedirs(root)
    with open(os.path.join(root, "allowed_signers"), "w") as f:
        f.write(f'{NAMESPACE} namespaces="{NAMESPACE}" {open(signer_pub).read()}')
    sshd = realenv.Sshd(os.path.join(work, name), forced=True).start()
    sshd.force(remote, binding_dir, [f"--inventory_file={INVENTORY}"], update_root=root,
               pythonpath=[old])
    sshd.update_root = root
    return sshd


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    require(not realenv.missing_prerequisites(), f"missing: {realenv.missing_prerequisites()}")
    require(os.geteuid() == 0, "sshd with its own config needs root here")
    work = str(tmp_path_factory.mktemp("update"))
    signing, other = keypair(os.path.join(work, "signing")), keypair(os.path.join(work, "other"))
    wheel = wheel_of_this_tree(work)
    subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-f", signing, "-n", NAMESPACE, wheel],
                   check=True, capture_output=True)
    remote = os.path.join(work, "remote")
    binding_dir = os.path.join(work, "ironic", "binding")
    good = old_stand_in(work, "good", signing + ".pub", remote, binding_dir)
    wrong = old_stand_in(work, "wrong", other + ".pub", remote, binding_dir)
    wrong.client_key_file = good.client_key_file            # one conductor key for both
    wrong.force(remote, binding_dir, [f"--inventory_file={INVENTORY}"],
                update_root=wrong.update_root, pythonpath=[os.path.join(work, "wrong-old")],
                key_file=good.client_key_file)
    opts = {"ssh_private_key_file": good.client_key_file, "poll_interval": 1,
            "deploy_timeout": 120, "connect_timeout": 5, "command_timeout": 40,
            "ramdisk_commands": True, "provision_extra_args": "--dry_run",
            "remote_dir": remote, "data_driver": "native", "agent_update_wheel": wheel}
    server = realenv.Ironic(work, opts)
    server.remote = remote
    server.start()
    yield server, good, wrong
    server.stop()
    good.stop()
    wrong.stop()


def test_an_older_ramdisk_is_updated_in_place_and_the_deploy_completes(setup):
    ironic, good, _ = setup
    uuid = _enroll(ironic, good, "update-good", _layout())
    ironic.set_state(uuid, "active")
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 120)
    assert node["provision_state"] == "active", node["last_error"]
    assert node["driver_internal_info"]["provision_exit_code"] == 0
    log = ironic.log_text()
    assert f"updating its ramdisk's provision 0.0.1 to {OURS}" in log
    assert f"its ramdisk runs provision {OURS}, dispatcher protocol 1" in log
    current = os.path.realpath(os.path.join(good.update_root, "current"))
    assert os.path.isfile(os.path.join(current, "provision_agent", "agent", "update.py"))


def test_a_push_the_ramdisk_cannot_verify_fails_the_deploy_with_its_reason(setup):
    ironic, _, wrong = setup
    uuid = _enroll(ironic, wrong, "update-wrong", _layout(), host_key=wrong.host_key)
    ironic.set_state(uuid, "active")
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 120)
    assert node["provision_state"] == "deploy failed"
    error = node["last_error"]
    assert f"the ramdisk refused the update of its provision 0.0.1 to {OURS}" in error, error
    assert "the signature does not verify against this ramdisk's update keys" in error
    assert not os.path.exists(os.path.join(wrong.update_root, "current"))
    assert not os.path.exists(os.path.join(ironic.remote, uuid, "input.json"))
