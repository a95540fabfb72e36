"""The binding's check and the job's start in one command (remote.start_bound over
ssh_after.run_after): the ramdisk's binding file comes back first, and the document is sent,
and provision started, only when it binds the ramdisk to this node with the node's token.
The command runs here in a shell, as sshd would run it, behind a stand-in for paramiko's
channel."""

import os
import subprocess
import time

import pytest

from ironic_driver.conversation import remote, ssh
from provision_agent import binding

NODE = "5a1d1f0e-8b2c-4f6b-9f3d-7c0e2a4b6d88"
TOKEN = "the-token"


class ShellChannel:
    """What ssh_after.run_after uses of a paramiko channel, on a local `sh -c`."""

    def __init__(self, session):
        self.session, self.proc, self.sent = session, None, b""

    def set_combine_stderr(self, _combine):
        pass

    def exec_command(self, command):
        self.session.commands.append(command)
        self.proc = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def settimeout(self, _seconds):
        pass

    def recv(self, size):
        return os.read(self.proc.stdout.fileno(), size)

    def sendall(self, data):
        self.sent += data
        self.proc.stdin.write(data)

    def shutdown_write(self):
        self.proc.stdin.close()

    def close(self):
        """As sshd when the client closes the channel: stdin ends (the shell's `read` gets
        an end of file); a command still writing is stopped."""
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            self.proc.wait(2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    @property
    def status_event(self):
        proc = self.proc

        class Done:
            def wait(self, seconds):
                return proc.wait(seconds) is not None
        return Done()

    def recv_exit_status(self):
        return self.proc.wait(10)


class ShellSession:
    """What remote.start_bound uses of an ssh.Session; counts commands, never reads SFTP."""

    def __init__(self):
        self.commands, self.channels = [], []
        self.client = self

    def get_transport(self):
        return self

    def open_session(self, timeout):
        self.channels.append(ShellChannel(self))
        return self.channels[-1]

    def left(self):
        return 10.0

    def check(self, exc=None):
        pass

    def read(self, *args):
        raise AssertionError("the binding is read in the start's own command, not by SFTP")


def _provision(tmp_path):
    fake = tmp_path / "fake-provision"
    fake.write_text('#!/bin/sh\ncat "$4" >"$4.seen"\n')
    fake.chmod(0o755)
    return remote.provision_argv(str(fake), "ironic")


def _start(tmp_path, token=TOKEN, node=NODE, content=None):
    bindings = tmp_path / "binding"
    if content is not None:
        bindings.mkdir()
        (bindings / node).write_bytes(content)
    elif token is not None:
        binding.write(str(bindings), node, token)
    session = ShellSession()
    directory = tmp_path / "job"
    document = '{"instance_info": {}}\n' * 500
    result = remote.start(session, str(directory), document, _provision(tmp_path), job="j1",
                          bound=(str(bindings), NODE, TOKEN))
    return session, directory, document, result


def test_a_bound_ramdisk_gets_the_document_and_provision_in_one_command(tmp_path):
    session, directory, document, result = _start(tmp_path)
    assert result is True
    assert len(session.commands) == 1
    assert session.channels[0].sent == b"go\n" + document.encode()
    deadline = time.monotonic() + 10
    while not (directory / remote.EXIT_CODE).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (directory / remote.EXIT_CODE).read_text().strip() == "0"
    assert (directory / (remote.INPUT + ".seen")).read_text() == document


@pytest.mark.parametrize("case,why", [
    (dict(token="an-earlier-token"), "another agent token"),
    (dict(token=None), "no binding file"),
    (dict(content=b"x" * (binding.MAX_BYTES + 100)), f"larger than {binding.MAX_BYTES}"),
    (dict(content=b"not json"), "not JSON"),
])
def test_a_ramdisk_that_cannot_show_this_nodes_binding_is_sent_nothing(tmp_path, case, why):
    with pytest.raises(remote.BadRamdisk) as raised:
        _start(tmp_path, **case)
    assert why in str(raised.value)
    assert TOKEN not in str(raised.value)
    assert not (tmp_path / "job" / remote.INPUT).exists()
    assert not (tmp_path / "job" / remote.JOB).exists()
    assert not (tmp_path / "job" / remote.EVENTS).exists()       # provision never started


def test_the_shell_gives_up_without_the_go_line(tmp_path):
    binding.write(str(tmp_path / "binding"), NODE, TOKEN)
    command = remote.bound_start_command(binding.path(str(tmp_path / "binding"), NODE),
                                         str(tmp_path / "job"), _provision(tmp_path), "j1")
    done = subprocess.run(["sh", "-c", command], input=b"", capture_output=True, timeout=10)
    assert done.returncode == 3
    assert done.stdout.endswith(f"\n{remote.BINDING_END}\n".encode())
    assert not (tmp_path / "job").exists()


def test_a_command_that_never_prints_its_marker_is_too_large(tmp_path):
    session = ShellSession()
    from ironic_driver.conversation import ssh_after
    with pytest.raises(ssh.TooLarge):
        ssh_after.run_after(session, "head -c 100000 /dev/zero", 4096, "END",
                            lambda head: b"")
