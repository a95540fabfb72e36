"""The job's start as one command over the SSH session: the document on its stdin, no SFTP
upload (remote.start_with_input_command), run here by a shell as sshd would run it."""

import os
import stat
import subprocess
import time

from ironic_driver.conversation import remote


class LocalSession:
    """What remote.start uses of an ssh.Session, on this machine; counts what it is asked."""

    def __init__(self):
        self.commands, self.uploads = [], []

    def run(self, command, stdin=None):
        self.commands.append(command)
        done = subprocess.run(["sh", "-c", command], capture_output=True, input=stdin,
                              timeout=10)
        return done.returncode, done.stdout.decode()

    def upload(self, data, path, mode=0o600):
        self.uploads.append(path)


def _fake(tmp_path, body):
    fake = tmp_path / "fake-provision"
    fake.write_text(f"#!/bin/sh\n{body}\n")
    fake.chmod(0o755)
    return remote.provision_argv(str(fake), "native")


def _wait_exit(directory):
    deadline = time.monotonic() + 10
    while not (directory / remote.EXIT_CODE).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return (directory / remote.EXIT_CODE).read_text().strip()


def test_one_command_uploads_and_starts(tmp_path):
    command = _fake(tmp_path, 'cat "$4" >"$4.seen"; exit 0')
    directory = tmp_path / "job"
    session = LocalSession()
    document = '{"layout": "x" }\n' * 1000         # larger than a pipe's first write
    assert remote.start(session, str(directory), document, command, job="j1")
    assert len(session.commands) == 1 and session.uploads == []
    assert _wait_exit(directory) == "0"
    assert (directory / remote.INPUT).read_text() == document
    assert (directory / (remote.INPUT + ".seen")).read_text() == document   # what it read
    assert stat.S_IMODE(os.stat(directory / remote.INPUT).st_mode) == 0o600
    assert not (directory / (remote.INPUT + ".part")).exists()
    # provision itself does not inherit the document's umask
    assert stat.S_IMODE(os.stat(directory / remote.EVENTS).st_mode) & 0o044


def test_a_running_job_is_left_alone_and_its_document_kept(tmp_path):
    command = _fake(tmp_path, "sleep 3")
    directory = tmp_path / "job"
    session = LocalSession()
    assert remote.start(session, str(directory), "first", command, job="j1")
    assert not remote.start(session, str(directory), "second", command, job="j2")
    assert (directory / remote.INPUT).read_text() == "first"


def test_a_finished_job_of_the_same_identity_is_adopted(tmp_path):
    command = _fake(tmp_path, "exit 0")
    directory = tmp_path / "job"
    session = LocalSession()
    assert remote.start(session, str(directory), "doc", command, job="j1")
    assert _wait_exit(directory) == "0"
    assert not remote.start(session, str(directory), "doc", command, job="j1")
    assert remote.start(session, str(directory), "new", command, job="j2")   # another job


def test_a_directory_that_cannot_be_made_fails_with_what_the_shell_said(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    try:
        remote.start(LocalSession(), str(blocker / "job"), "doc", _fake(tmp_path, "exit 0"))
    except RuntimeError as exc:
        assert "cannot start provision in the ramdisk" in str(exc)
        assert "mkdir" in str(exc)
    else:
        raise AssertionError("started in a directory that cannot exist")
