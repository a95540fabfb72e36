"""A ramdisk that answers the conductor with endless or dripping files, as a broken ramdisk or
an image's hook that reached the job directory could: every look at it ends by its deadline
and reads a bounded number of bytes, and the deploy fails with a reason instead of holding a
conductor worker for ever.

Real: the local sshd standing in for the ramdisk (its SFTP server reading /dev/zero and FIFOs
as a ramdisk's would), paramiko, and, in the second half, a real Ironic whose nodes' "provision"
is a hostile stand-in script."""

import json
import logging
import os
import socket
import stat
import sys
import threading
import time
import tracemalloc

import pytest

from ironic_driver import report
from ironic_driver.conversation import follow, remote, ssh
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


# ---- what a hostile ramdisk's SSH and SFTP servers say, kept bounded and clean

BIG = 8 << 20   # an SFTP status message as large as paramiko reads one (16 MB)


def _hostile_sshd(ramdisk, tmp_path_factory, *mode):
    script = os.path.join(REPO_ROOT, "tests", "ironic", "hostile_sftp.py")
    sshd = realenv.Sshd(str(tmp_path_factory.mktemp("hostile")),
                        sftp=" ".join([sys.executable, script, *mode])).start()
    with open(ramdisk.client_key_file + ".pub") as key, \
            open(os.path.join(sshd.dir, "authorized_keys"), "a") as keys:
        keys.write(key.read())
    return sshd


@pytest.fixture(scope="module")
def status_ramdisk(ramdisk, tmp_path_factory):
    """Its SFTP server fails every request with an 8 MB message that starts with escapes."""
    sshd = _hostile_sshd(ramdisk, tmp_path_factory, "status", str(BIG))
    yield sshd
    sshd.stop()


@pytest.fixture(scope="module", params=["garbage", "badutf8"])
def broken_sftp_ramdisk(request, ramdisk, tmp_path_factory):
    sshd = _hostile_sshd(ramdisk, tmp_path_factory, request.param)
    yield sshd
    sshd.stop()


def _failed_look(ramdisk, look):
    """The exception one look raised, and what the node would keep of it."""
    with _session(ramdisk) as session:
        with pytest.raises(follow.TRANSIENT) as caught:
            look(session)
    return caught.value, follow.ssh_error(caught.value)


def test_an_8mb_sftp_status_message_is_kept_cut_and_clean(status_ramdisk, tmp_path):
    exc, kept = _failed_look(status_ramdisk,
                             lambda s: s.upload("{}", str(tmp_path / remote.INPUT)))
    assert len(str(exc)) >= BIG - 100     # what paramiko raised: the server's whole text
    assert len(kept) <= report.ERROR_CHARS + 100, len(kept)
    assert "\x1b" not in kept and "\x07" not in kept and "owned" not in kept
    assert kept.startswith("OSError: ") and "AAAA" in kept and "characters in all" in kept


def test_a_broken_sftp_answer_refuses_the_ramdisk(broken_sftp_ramdisk, tmp_path):
    with _session(broken_sftp_ramdisk) as session:
        with pytest.raises(ssh.BrokenProtocol, match="SFTP server broke the protocol"):
            remote.status(session, str(tmp_path), 0, 5)


@pytest.fixture
def banner_server():
    """A TCP server on 127.0.0.1 that greets with 99 lines and then a 1 MB line of escapes
    and text, none of them an SSH banner: paramiko gives up on the 100th."""
    server = socket.create_server(("127.0.0.1", 0))
    line = (b"\x1b[2J\x1b]0;owned\x07" + b"B" * (1 << 20))[:1 << 20]

    def serve():
        conn, _ = server.accept()
        with conn:
            conn.sendall(b"hello\r\n" * 99 + line + b"\r\n")
            while conn.recv(4096):     # until the client gives up
                pass
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    server.close()
    thread.join(10)


def test_a_1mb_banner_line_is_neither_kept_nor_logged_whole(banner_server, ramdisk, caplog):
    caplog.set_level(logging.DEBUG, logger="paramiko")
    with pytest.raises(follow.TRANSIENT) as caught:
        ssh.connect("127.0.0.1", banner_server, "root",
                    ssh.load_private_key(ramdisk.client_key_file), host_key=ramdisk.host_key,
                    timeout=CONNECT, deadline=CONNECT + COMMAND)
    assert len(str(caught.value)) > 1 << 20      # paramiko's exception quotes the line
    kept = follow.ssh_error(caught.value)
    assert len(kept) <= report.ERROR_CHARS + 100 and "\x1b" not in kept
    logged = [r for r in caplog.records if r.name.startswith("paramiko")]
    assert any("Indecipherable protocol version" in r.getMessage() for r in logged
               if r.levelno == logging.ERROR), [r.getMessage()[:80] for r in logged]
    for record in logged:
        assert len(record.getMessage()) <= report.LOG_CHARS + 100, record.getMessage()[:80]
        assert "\x1b" not in record.getMessage()


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


def test_an_8mb_sftp_status_message_stays_out_of_the_record(ironic, status_ramdisk):
    uuid = _deploy(ironic, status_ramdisk, "hostile-status")
    node = realenv.wait_for(
        lambda: (lambda n: n if n["driver_internal_info"].get("provision_last_ssh_error")
                 else None)(ironic.node(uuid)), 30, what="an SSH error recorded")
    kept = node["driver_internal_info"]["provision_last_ssh_error"]
    assert len(kept) <= report.ERROR_CHARS + 100 and "\x1b" not in kept, kept[:200]
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 90)
    assert node["provision_state"] == "deploy failed"
    assert "[provision_agent]deploy_timeout is 30 s" in node["last_error"], node["last_error"]
    assert "\x1b" not in node["last_error"] and "owned" not in node["last_error"]
    assert len(node["last_error"]) < report.MESSAGE_CHARS + 200


def test_a_garbage_sftp_packet_fails_the_deploy_at_once(ironic, ramdisk, tmp_path_factory):
    sshd = _hostile_sshd(ramdisk, tmp_path_factory, "garbage")
    try:
        uuid = _deploy(ironic, sshd, "hostile-garbage")
        node = ironic.wait_state(uuid, ["active", "deploy failed"], 25)
    finally:
        sshd.stop()
    assert node["provision_state"] == "deploy failed"
    assert "SFTP server broke the protocol" in node["last_error"], node["last_error"]
