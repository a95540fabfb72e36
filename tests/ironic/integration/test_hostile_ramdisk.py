"""A ramdisk that answers the conductor with endless or dripping files, as a broken ramdisk or
an image's hook that reached the job directory could: every look at it ends by its deadline
and reads a bounded number of bytes, and the deploy fails with a reason instead of holding a
conductor worker for ever.

Real: the local sshd standing in for the ramdisk (its SFTP server reading /dev/zero and FIFOs
as a ramdisk's would), paramiko, and, in the second half, a real Ironic whose nodes' "provision"
is a hostile stand-in script."""

import json
import os
import stat
import sys
import time
import tracemalloc

import pytest

from ironic_driver import remote, ssh
from tests import REPO_ROOT
from tests.ironic import realenv

CONNECT, COMMAND = 3, 3     # one look may take CONNECT + COMMAND seconds
with open(os.path.join(REPO_ROOT, "samples", "single-disk.json")) as _f:
    LAYOUT = json.load(_f)


def _session(ramdisk):
    return ssh.connect("127.0.0.1", ramdisk.port, "root",
                       ssh.load_private_key(ramdisk.client_key_file),
                       host_key=ramdisk.host_key, timeout=CONNECT, deadline=CONNECT + COMMAND)


def test_an_endless_exit_code_file_is_read_to_its_limit(ramdisk, tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    os.symlink("/dev/zero", job / remote.EXIT_CODE)
    (job / remote.EVENTS).symlink_to("/dev/zero")
    tracemalloc.start()
    try:
        with _session(ramdisk) as session:
            with pytest.raises(remote.BadRamdisk, match="not an exit code"):
                remote.status(session, str(job), 0, 5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak} bytes held for one look"


@pytest.fixture(scope="module")
def slow_ramdisk(ramdisk, tmp_path_factory):
    """A ramdisk whose SFTP answers come a byte every half second; the conductor's key of
    the `ramdisk` fixture opens it too."""
    script = os.path.join(REPO_ROOT, "tests", "ironic", "slow_sftp.py")
    sshd = realenv.Sshd(str(tmp_path_factory.mktemp("slow")),
                        sftp=f"{sys.executable} {script} 0.5").start()
    with open(ramdisk.client_key_file + ".pub") as key, \
            open(os.path.join(sshd.dir, "authorized_keys"), "a") as keys:
        keys.write(key.read())
    yield sshd
    sshd.stop()


def test_a_dripping_sftp_server_ends_the_look_at_its_deadline(slow_ramdisk, tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / remote.EXIT_CODE).write_text("0\n")
    start = time.monotonic()
    with pytest.raises(ssh.LimitExceeded, match=f"within {CONNECT + COMMAND} s"):
        with _session(slow_ramdisk) as session:
            remote.status(session, str(job), 0, 5)
    # At a byte every 0.5 s the SFTP handshake alone would take most of a minute.
    assert time.monotonic() - start < CONNECT + COMMAND + 3


@pytest.mark.parametrize("command", ["while :; do printf 0; sleep 0.5; done", "sleep 60"],
                         ids=["drips-its-output", "never-ends"])
def test_a_command_that_stalls_ends_the_look_at_its_deadline(ramdisk, command):
    start = time.monotonic()
    with _session(ramdisk) as session:
        with pytest.raises(ssh.LimitExceeded):
            session.run(command)
    assert time.monotonic() - start < CONNECT + COMMAND + 3


def test_a_command_that_floods_its_output_is_cut(ramdisk):
    with _session(ramdisk) as session:
        with pytest.raises(ssh.TooLarge):
            session.run("cat /dev/zero")


# ---- a real Ironic following nodes whose ramdisk turned hostile

HOSTILE = """#!/bin/sh
# Stands in for provision on a ramdisk an image's hook took over: it is run by the conductor's
# wrapper in the job directory, replaces the files the conductor reads, and never exits. What
# it does is listed per node (job directory) in ../kinds.
kind=$(awk -v d="${PWD##*/}" '$1 == d {print $2}' ../kinds)
case "$kind" in
  endless) ln -sf /dev/zero exit_code; ln -sf /dev/zero events.jsonl ;;
esac
exec sleep 600
"""


@pytest.fixture(scope="module")
def ironic(ramdisk, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ironic-hostile"))
    script = os.path.join(workdir, "hostile-provision")
    with open(script, "w") as f:
        f.write(HOSTILE)
    os.chmod(script, stat.S_IRWXU)
    server = realenv.Ironic(workdir, {
        "ssh_private_key_file": ramdisk.client_key_file,
        "poll_interval": 1,
        "deploy_timeout": 30,
        "connect_timeout": CONNECT,
        "command_timeout": COMMAND,
        "data_driver": "native",
        "provision_command": script,
        "remote_dir": os.path.join(workdir, "remote"),
    })
    server.remote_dir = os.path.join(workdir, "remote")
    server.start()
    yield server
    server.stop()


def _deploy(ironic, ramdisk, name, kind="plain"):
    uuid = ironic.enroll(name, {"provision_ssh_address": "127.0.0.1",
                                "provision_ssh_port": ramdisk.port,
                                "provision_host_key": ramdisk.host_key},
                         {"image_source": "http://127.0.0.1:9/img", "provision_layout": LAYOUT})
    os.makedirs(ironic.remote_dir, exist_ok=True)
    with open(os.path.join(ironic.remote_dir, "kinds"), "a") as f:
        f.write(f"{uuid} {kind}\n")
    ironic.set_state(uuid, "active")
    return uuid


def test_an_endless_exit_code_fails_the_deploy_at_once(ironic, ramdisk):
    uuid = _deploy(ironic, ramdisk, "hostile-endless", "endless")
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 60)
    assert node["provision_state"] == "deploy failed"
    assert "not an exit code" in node["last_error"], node["last_error"]
    assert "refusing the ramdisk at 127.0.0.1" in node["last_error"]


def test_a_dripping_ramdisk_ends_each_look_and_the_deploy_times_out(ironic, slow_ramdisk):
    uuid = _deploy(ironic, slow_ramdisk, "hostile-drip")
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 90)
    assert node["provision_state"] == "deploy failed"
    assert "[provision_agent]deploy_timeout is 30 s" in node["last_error"], node["last_error"]
    assert f"within {CONNECT + COMMAND} s" in node["last_error"]
