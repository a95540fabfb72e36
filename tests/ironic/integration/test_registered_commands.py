"""The conductor's key forced into provision-dispatch, as a ramdisk built with --conductor-key
installs it (`restrict,command="provision-dispatch ..."` in authorized_keys), against a real
sshd: no shell, no unregistered command, no file outside the job directory, no SFTP, no port
forward, no argument outside a schema; each tried, each refused (and logged by the
dispatcher, or refused by sshd before any command runs); every registered command works.
The whole Ironic cycle over registered commands: PROVISION_TEST_RAMDISK_COMMANDS=1 runs the
integration suite's stand-in forced (tests/ironic/conftest.py)."""

import json
import os
import socket
import subprocess

import paramiko
import pytest

from provision_agent import binding
from tests.ironic import realenv
from tests.ironic.conftest import require

NODE = "5a0cbd59-94a4-4a6d-a4b4-2f0c1d6e9b10"
JOB = "89abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def forced(tmp_path_factory):
    require(not realenv.missing_prerequisites(), f"missing: {realenv.missing_prerequisites()}")
    require(os.geteuid() == 0, "sshd with its own config needs root here")
    work = tmp_path_factory.mktemp("forced")
    (work / "bind").mkdir()
    (work / "bind" / NODE).write_text(binding.render(NODE, "the-token"))
    fakebin = work / "bin"
    fakebin.mkdir()
    # poweroff through the dispatcher, without powering this host off
    (fakebin / "provision-poweroff").write_text(f"#!/bin/sh\ntouch {work}/powered-off\n")
    (fakebin / "provision-poweroff").chmod(0o755)
    sshd = realenv.Sshd(str(work), forced=True).start()
    sshd.force(str(work / "jobs"), str(work / "bind"),
               ["--inventory_file=" + os.path.join(realenv.REPO, "samples", "inventory",
                                                   "single-disk.json")],
               path=f"{fakebin}:/usr/sbin:/usr/bin:/sbin:/bin")
    sshd.work = work
    yield sshd
    sshd.stop()


def ssh(sshd, *words, stdin=b"", extra=()):
    argv = ["ssh", "-T", "-p", str(sshd.port), "-i", sshd.client_key_file, "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR", *extra, "root@127.0.0.1", *words]
    return subprocess.run(argv, input=stdin, capture_output=True, timeout=60, check=False)


def last_record(sshd):
    with open(sshd.dispatch_log) as f:
        return json.loads(f.read().splitlines()[-1])


@pytest.mark.parametrize("words, reason", [
    ((), "no command given"),
    (("sh", "-c", "id"), "'sh' is not a registered command"),
    (("cat", "/etc/shadow"), "'cat' is not a registered command"),
    (("version;", "id"), "'version;' is not a registered command"),
    (("read", NODE, "../../../etc/passwd", "0", "100"), "read: file:"),
    (("read", "../../etc", "passwd", "0", "100"), "read: node:"),
    (("binding", "../../../etc/shadow"), "binding: node:"),
    (("read", NODE, "exit_code", "0", "999999999"), "read: limit:"),
    (("start", "provision", NODE, JOB, "--flag=--inventory_file=/etc/shadow"), "flag/0"),
    (("start", "provision", NODE, JOB, "--provision=/bin/sh"), "is not one it takes"),
    (("version", "--debug=1"), "is not one it takes"),
])
def test_refused_and_logged(forced, words, reason):
    done = ssh(forced, *words)
    assert done.returncode == 126, done
    assert done.stdout == b"" and reason in done.stderr.decode()
    record = last_record(forced)
    assert record["outcome"] == "refused" and reason in record["reason"]
    assert record["binding"] == [NODE] and record["client"] == "127.0.0.1"


def test_no_sftp(forced):
    done = subprocess.run(["sftp", "-b", "-", "-P", str(forced.port), "-i",
                           forced.client_key_file, "-o", "StrictHostKeyChecking=no",
                           "-o", "UserKnownHostsFile=/dev/null", "root@127.0.0.1"],
                          input=b"get /etc/passwd /dev/null\n", capture_output=True,
                          timeout=60, check=False)
    assert done.returncode != 0
    record = last_record(forced)
    assert record["outcome"] == "refused" and "sftp" in record["request"], record


def _transport(sshd):
    sock = socket.create_connection(("127.0.0.1", sshd.port), timeout=10)
    transport = paramiko.Transport(sock)
    transport.start_client(timeout=10)
    transport.auth_publickey("root", paramiko.Ed25519Key.from_private_key_file(
        sshd.client_key_file))
    return transport


def test_no_port_forwarding_either_way(forced):
    transport = _transport(forced)
    try:
        with pytest.raises(paramiko.ChannelException):
            transport.open_channel("direct-tcpip", ("127.0.0.1", forced.port), ("127.0.0.1", 0),
                                   timeout=10)
        with pytest.raises(paramiko.SSHException):
            transport.request_port_forward("127.0.0.1", 0)
        # nor a pty for an interactive session: the forced command runs, and refuses
        channel = transport.open_session(timeout=10)
        with pytest.raises(paramiko.SSHException):
            channel.get_pty()
    finally:
        transport.close()
    # sshd refused it before any command ran, and logged it
    log = os.path.join(forced.dir, "sshd.log")
    realenv.wait_for(lambda: "refused local port forward" in open(log).read(), 10,
                     what="sshd's refusal in its log")


def test_every_registered_command_works(forced):
    answer = json.loads(ssh(forced, "version").stdout)
    assert answer["protocol"] == 1 and "start" in answer["commands"]
    binding.check(ssh(forced, "binding", NODE).stdout, NODE, "the-token")
    assert ssh(forced, "keyring", NODE, JOB, stdin=b"KEYS").returncode == 0
    done = ssh(forced, "start", "provision", NODE, JOB, "--data_driver=native",
               "--flag=--dry_run", "--keyring=1",
               stdin=open(os.path.join(realenv.REPO, "samples", "single-disk.json"), "rb").read())
    assert (done.returncode, done.stdout) == (0, b"started\n"), done
    realenv.wait_for(lambda: ssh(forced, "read", NODE, "exit_code", "0", "32").returncode == 0,
                     60, what="exit_code")
    output = ssh(forced, "read", NODE, "output.log", "0", "65536").stdout.decode()
    assert ssh(forced, "read", NODE, "exit_code", "0", "32").stdout == b"0\n"
    assert "Plan (11 steps)" in output and "/dev/vda3" in output
    # the keyring stayed beside the document (it is not one of the files `read` serves)
    assert (forced.work / "jobs" / NODE / "keyring.pgp").read_bytes() == b"KEYS"
    events = ssh(forced, "read", NODE, "events.jsonl", "0", "1048576").stdout.splitlines()
    assert json.loads(events[0])["status"] == "started"
    assert json.loads(events[-1])["status"] == "exited"
    assert ssh(forced, "cancel", NODE).returncode == 3     # nothing running any more
    assert ssh(forced, "poweroff").returncode == 0
    assert (forced.work / "powered-off").exists()
    inventory = ssh(forced, "inventory")
    assert inventory.returncode == 0 and json.loads(inventory.stdout)["inventory"]["disks"]
    with open(forced.dispatch_log) as f:
        accepted = {json.loads(line)["request"].split()[0] for line in f
                    if '"accepted"' in line}
    assert accepted >= {"version", "binding", "keyring", "start", "read", "cancel",
                        "poweroff", "inventory"}


def test_update_is_refused_by_a_ramdisk_without_update_key(forced):
    """The stand-in has no allowed_signers file (no build.sh --update-key): `version` says so
    and `update` refuses before it reads the wheel; tests/e2e/test_agent_update.py takes one."""
    answer = json.loads(ssh(forced, "version").stdout)
    assert "update" in answer["commands"]
    assert answer["update"].startswith("disabled: updates are disabled: this ramdisk was built "
                                       "without an update key")
    done = ssh(forced, "update", "c2lnbmF0dXJl", stdin=b"PK not a wheel")
    assert done.returncode == 126 and b"update refused: updates are disabled" in done.stderr
    assert last_record(forced)["outcome"] == "refused"
