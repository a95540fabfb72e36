"""provision-dispatch: each refusal (exit 126, one line, logged), each registered command's
schema, and the commands run against a job directory in tmp_path."""

import io
import json
import os
import sys
import time

import pytest

from provision_agent import binding
from provision_agent.agent import dispatch, ramdisk_commands

NODE = "1be26c0b-03f2-4d3e-b7c9-8a0b41f7a3b1"
JOB = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def env(tmp_path):
    provision = tmp_path / "provision"
    # A stand-in provision: prints its argv, writes one event, exits 7 (or 0 for inventory).
    provision.write_text("#!/bin/sh\n"
                         "[ \"$1\" = inventory ] && { echo '{\"disks\": []}'; exit 0; }\n"
                         "echo \"$@\"\n"
                         "while [ $# -gt 0 ]; do [ \"$1\" = --events_file ] && "
                         "echo '{\"event\": \"x\"}' >>\"$2\"; shift; done\n"
                         "sleep \"${SLEEP:-0}\"; exit 7\n")
    provision.chmod(0o755)
    (tmp_path / "bind").mkdir()
    (tmp_path / "bind" / NODE).write_text(binding.render(NODE, "token"))
    argv = ["--job_root", str(tmp_path / "jobs"), "--binding_dir", str(tmp_path / "bind"),
            "--provision", str(provision), "--log_file", str(tmp_path / "dispatch.log")]
    return tmp_path, argv


def call(env, request, stdin=b""):
    out = io.BytesIO()
    rc = dispatch.main(env[1], {"SSH_ORIGINAL_COMMAND": request} if request is not None else {},
                       io.BytesIO(stdin), out)
    return rc, out.getvalue()


def logged(env):
    return [json.loads(line) for line in (env[0] / "dispatch.log").read_text().splitlines()]


@pytest.mark.parametrize("request_line, reason", [
    (None, "no command given"),
    ("", "no command given"),
    ("sh", "'sh' is not a registered command"),
    ("/usr/lib/openssh/sftp-server", "is not a registered command"),
    ("internal-sftp", "is not a registered command"),
    ("cat /etc/shadow", "'cat' is not a registered command"),
    ("version; sh", "'version;' is not a registered command"),
    ("version extra", "version: extra argument 'extra'"),
    (f"read {NODE} ../../etc/shadow 0 10", "read: file:"),
    (f"read {NODE} exit_code 0 99999999", "read: limit:"),
    (f"read {NODE} exit_code zero 10", "read: offset:"),
    ("read ../../etc exit_code 0 10", "read: node:"),
    (f"binding {NODE} --extra=1", "option '--extra=1' is not one it takes"),
    (f"start provision {NODE} {JOB} --flag=--inventory_file=/etc/shadow", "start: flag/0:"),
    (f"start shell {NODE} {JOB}", "start: kind:"),
    (f"start provision {NODE} {JOB} --data_driver=native --data_driver=x", "given twice"),
    (f"start provision {NODE}", "start: arguments: 'job' is a required property"),
    ("version 'unterminated", "cannot split the request"),
    ("x" * 5000, "longer than 4096"),
])
def test_refused_with_126_one_line_and_logged(env, capsys, request_line, reason):
    rc, out = call(env, request_line)
    err = capsys.readouterr().err
    assert rc == dispatch.REFUSED and out == b""
    assert err.count("\n") == 1 and err.startswith("provision-dispatch: refused: ")
    assert reason in err
    record = logged(env)[-1]
    assert record["outcome"] == "refused" and reason in record["reason"]
    assert record["binding"] == [NODE]


def test_no_file_outside_the_job_directory_is_named(env):
    # A node is a UUID and a file one of five names: no path the client chooses.
    command = dispatch.registry(extra=False)["read"]
    assert command.schema["properties"]["file"]["enum"] == list(ramdisk_commands.FILES)
    for bad in ("..", "/", f"{NODE}/..", f"{NODE}\n"):
        with pytest.raises(dispatch.Refused):
            dispatch.parse(f"binding '{bad}'", dispatch.registry(extra=False))


def test_version_names_provision_protocol_and_commands(env):
    rc, out = call(env, "version")
    answer = json.loads(out)
    assert rc == 0 and answer["protocol"] == ramdisk_commands.PROTOCOL
    assert answer["provision"] == ramdisk_commands.version()
    assert {"start", "read", "binding", "keyring", "cancel", "poweroff"} <= set(
        answer["commands"])
    assert logged(env)[-1] == {**logged(env)[-1], "outcome": "accepted", "request": "version"}


def wait_exit_code(env, node=NODE, timeout=10):
    path = env[0] / "jobs" / node / "exit_code"
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, "no exit_code"
        time.sleep(0.05)
    return path.read_text().strip()


def test_start_writes_the_document_runs_provision_and_reads_back(env):
    rc, out = call(env, f"start provision {NODE} {JOB} --data_driver=native --flag=--dry_run",
                   b'{"doc": 1}')
    assert (rc, out) == (0, b"started\n")
    assert wait_exit_code(env) == "7"
    directory = env[0] / "jobs" / NODE
    assert (directory / "input.json").read_bytes() == b'{"doc": 1}'
    assert oct((directory / "input.json").stat().st_mode & 0o777) == "0o600"
    rc, events = call(env, f"read {NODE} events.jsonl 0 65536")
    lines = [json.loads(x) for x in events.splitlines()]
    assert rc == 0 and lines[0]["status"] == "started" and lines[1] == {"event": "x"}
    assert lines[2] == {"event": "wrapper", "status": "exited", "exit_code": 7}
    rc, output = call(env, f"read {NODE} output.log -20000 20000")
    assert b"--data_driver native --dry_run --input_data_file" in output
    assert b"--recovery_key_file" in output
    # The same job again: finished, kept, not started twice.
    assert call(env, f"start provision {NODE} {JOB}", b"{}") == (0, b"provision-already-finished\n")
    assert (directory / "input.json").read_bytes() == b'{"doc": 1}'
    assert call(env, f"read {NODE} exit_code 0 32") == (0, b"7\n")


def test_a_running_provision_is_not_started_again_and_cancel_stops_it(env, monkeypatch):
    monkeypatch.setenv("SLEEP", "30")
    assert call(env, f"start erase {NODE} {JOB}", b"{}") == (0, b"started\n")
    deadline = time.monotonic() + 10
    while call(env, f"read {NODE} events.jsonl 0 4096")[1].count(b"\n") < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    other = "f" * 32
    assert call(env, f"start erase {NODE} {other}", b"{}") == (0, b"provision-already-running\n")
    assert call(env, f"cancel {NODE}")[0] == 0
    assert wait_exit_code(env) != "0"
    rc, output = call(env, f"read {NODE} output.log 0 4096")
    assert output.startswith(b"erase ") and b"--recovery_key_file" not in output


def test_keyring_is_kept_for_the_start_that_asks_for_it(env):
    assert call(env, f"keyring {NODE} {JOB}", b"KEYS") == (0, b"")
    assert call(env, f"start provision {NODE} {JOB} --keyring=1", b"{}") == (0, b"started\n")
    wait_exit_code(env)
    assert (env[0] / "jobs" / NODE / "keyring.pgp").read_bytes() == b"KEYS"
    assert b"--image_keyring" in call(env, f"read {NODE} output.log 0 4096")[1]


def test_read_of_a_missing_file_and_binding(env):
    assert call(env, f"read {NODE} exit_code 0 32") == (ramdisk_commands.MISSING, b"")
    rc, data = call(env, f"binding {NODE}")
    binding.check(data, NODE, "token")
    other = "00000000-0000-0000-0000-000000000000"
    assert call(env, f"binding {other}") == (ramdisk_commands.MISSING, b"")


def test_stdin_is_bounded(env, monkeypatch):
    monkeypatch.setitem(ramdisk_commands.MAX_STDIN, "keyring", 4)
    rc, _ = call(env, f"keyring {NODE} {JOB}", b"12345")
    assert rc == 1 and not (env[0] / "jobs" / NODE / "keyring.pgp").exists()


def test_inventory_runs_provision_inventory(env):
    assert call(env, "inventory") == (0, b'{"disks": []}\n')


def test_a_plugin_adds_a_command_but_cannot_replace_one(monkeypatch):
    def ours(args, config, stdin, stdout):
        return 0
    extra = [dispatch.Command("vendor-x", ours, ramdisk_commands._schema(
        {"level": {"enum": ["1", "2"]}}), ("level",)),
        dispatch.Command("start", ours, ramdisk_commands._schema({}))]
    monkeypatch.setattr(dispatch, "_plugin_commands", lambda: extra)
    commands = dispatch.registry()
    assert commands["vendor-x"].run is ours and commands["start"].run is not ours
    assert dispatch.parse("vendor-x 2", commands)[1] == {"level": "2"}
    with pytest.raises(dispatch.Refused, match="level"):
        dispatch.parse("vendor-x 3", commands)


def test_the_console_script_is_declared():
    setup = open(os.path.join(os.path.dirname(dispatch.__file__), "..", "..",
                              "setup.cfg")).read()
    assert "provision-dispatch = provision_agent.agent.dispatch:main" in setup
    assert sys.modules["provision_agent.agent.dispatch"] is dispatch


class FakeSession:
    def __init__(self, rc, out):
        self.answer = (rc, out)

    def request(self, words, limit=None, stdin=None):
        return self.answer


@pytest.mark.parametrize("rc, out, words", [
    (127, b"sh: 1: version: not found", ["does not answer `version` (exit 127",
                                         "rebuild the ramdisk"]),
    (0, b'{"provision": "0.0.9", "protocol": 0}', ["provision 0.0.9 (dispatcher protocol 0), "
                                                   "older than this conductor's provision"]),
    (0, b'{"provision": "9.0.0", "protocol": 2}', ["provision 9.0.0 (dispatcher protocol 2), "
                                                   "newer than", "build.sh --conductor-key"]),
])
def test_the_conductor_refuses_a_ramdisk_it_cannot_speak_to(rc, out, words):
    from ironic_driver.conversation import dispatched
    with pytest.raises(RuntimeError) as caught:
        dispatched.check_version(FakeSession(rc, out))
    text = str(caught.value)
    assert all(w in text for w in words), text
    assert f"provision {dispatched.our_version()}" in text


def test_the_conductor_accepts_its_own_protocol_and_only_known_flags():
    from ironic_driver.conversation import dispatched
    answer = dispatched.check_version(FakeSession(0, b'{"provision": "x", "protocol": 1}'))
    assert answer["protocol"] == 1
    words = dispatched.start_words("provision", NODE, JOB, "native", ["--dry_run"])
    command, args = dispatch.parse(" ".join(words), dispatch.registry(extra=False))
    assert command.name == "start" and args["flag"] == ["--dry_run"]
    with pytest.raises(RuntimeError, match="--provision_arg"):
        dispatched.start_words("provision", NODE, JOB, None, ["--inventory_file", "/x"])
    # every file the conductor reads is one the dispatcher serves
    assert set(dispatched.FILES) == set(ramdisk_commands.FILES)
    session = dispatched.Session(None, "/run/provision-ironic", "/run/provision-ironic-agent")
    assert session._request_for(f"/run/provision-ironic/{NODE}/exit_code") == [
        "read", NODE, "exit_code"]
    assert session._request_for(f"/run/provision-ironic-agent/{NODE}") == ["binding", NODE]
    with pytest.raises(ValueError):
        session._request_for("/etc/shadow")


def test_the_heartbeat_carries_the_protocol_and_the_conductor_checks_it():
    from ironic_driver.conversation import dispatched
    from provision_agent.agent import ironic
    ours = ironic.agent_version()
    assert ours.endswith(f" protocol={ramdisk_commands.PROTOCOL}")
    dispatched.check_heartbeat_version(ours)
    for old, says in (("0.1.0", "'0.1.0' (no dispatcher protocol), older"),
                      ("0.0.1 protocol=0", "(protocol 0), older"),
                      ("9.0 protocol=7", "(protocol 7), newer")):
        with pytest.raises(RuntimeError, match="rebuild the ramdisk") as caught:
            dispatched.check_heartbeat_version(old)
        assert says in str(caught.value) and dispatched.our_version() in str(caught.value)
