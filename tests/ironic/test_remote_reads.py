"""Bounded reads of the ramdisk's files (ironic_driver.remote.status), on local files behind
a stand-in for paramiko's SFTP client that counts the bytes it hands out."""

import json
import os

import pytest

from ironic_driver import remote, ssh


class CountingFile:
    def __init__(self, path, mode, sftp):
        self._f, self._sftp = open(path, mode), sftp

    def stat(self):
        return os.fstat(self._f.fileno())

    def seek(self, offset):
        self._f.seek(offset)

    def read(self, size=-1):
        data = self._f.read(size if size is not None else -1)
        self._sftp.bytes_read += len(data)
        return data

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()


class LocalSftp:
    bytes_read = 0

    def open(self, path, mode):
        return CountingFile(path, mode, self)

    def get_channel(self):
        return self

    def settimeout(self, _timeout):
        pass

    def close(self):
        pass


class Client:
    def __init__(self):
        self.sftp = LocalSftp()

    def open_sftp(self):
        return self.sftp


def test_read_file_tail_limit_and_missing(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    sftp = LocalSftp()
    assert ssh.read_file(sftp, str(path), -4) == b"6789"
    assert ssh.read_file(sftp, str(path), -40) == b"0123456789"
    assert ssh.read_file(sftp, str(path), 2, 3) == b"234"
    assert ssh.read_file(sftp, str(tmp_path / "missing")) is None


def test_failure_tail_reads_only_the_end_of_a_big_log(tmp_path):
    lines = [f"debug line {i:06d} " + "x" * 80 for i in range(50000)]   # about 4.5 MB
    (tmp_path / remote.OUTPUT).write_text("\n".join(lines) + "\nERROR: disk /dev/vdz not found\n")
    (tmp_path / remote.EXIT_CODE).write_text("3\n")
    client = Client()
    st = remote.status(client, str(tmp_path), 0, 10, 3)
    assert st["exit_code"] == 3
    assert st["tail"].splitlines() == [lines[-2], lines[-1], "ERROR: disk /dev/vdz not found"]
    assert client.sftp.bytes_read <= remote.TAIL_BYTES + 16


def test_events_backlog_comes_in_bounded_chunks_without_loss(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "EVENTS_BYTES_PER_POLL", 1000)
    sent = [{"event": "progress", "n": i, "pad": "p" * 30} for i in range(200)]
    (tmp_path / remote.EVENTS).write_text("".join(json.dumps(e) + "\n" for e in sent))
    got, offset, polls = [], 0, 0
    while offset < (tmp_path / remote.EVENTS).stat().st_size:
        client = Client()
        st = remote.status(client, str(tmp_path), offset, 10, 5)
        assert client.sftp.bytes_read <= 1000 + 2   # the exit_code file is absent
        got += st["events"]
        offset = st["events_offset"]
        polls += 1
        assert polls < 100
    assert got == sent and polls > 1


def test_a_line_longer_than_one_read_does_not_stop_the_stream(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "EVENTS_BYTES_PER_POLL", 100)
    (tmp_path / remote.EVENTS).write_text('{"event": "' + "y" * 150 + '"}\n{"event": "ok"}\n')
    offset, seen = 0, []
    for _ in range(5):
        st = remote.status(Client(), str(tmp_path), offset, 10, 5)
        seen += [e["event"] for e in st["events"]]
        offset = st["events_offset"]
    assert "ok" in seen and seen[0] == "unparsed"


@pytest.mark.parametrize("name", [remote.OUTPUT, remote.LOG])
def test_tail_falls_back_to_the_log_when_output_is_empty(tmp_path, name):
    (tmp_path / remote.EXIT_CODE).write_text("4\n")
    (tmp_path / remote.OUTPUT).write_text("" if name == remote.LOG else "from output\n")
    (tmp_path / remote.LOG).write_text("from log\n")
    st = remote.status(Client(), str(tmp_path), 0, 10, 5)
    assert st["tail"] == ("from log" if name == remote.LOG else "from output")
