"""Bounded reads of the ramdisk's files (ironic_driver.conversation.remote.status), on local
files behind a stand-in for paramiko's SFTP client that counts the bytes it hands out."""

import json
import os

import pytest

from ironic_driver.conversation import remote, ssh


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
    """What remote.status uses of an ssh.Session, over local files."""

    def __init__(self):
        self.sftp = LocalSftp()

    def read(self, path, offset=0, limit=4096):
        return ssh.read_file(self.sftp, path, offset, limit)


def test_read_file_tail_limit_and_missing(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    sftp = LocalSftp()
    assert ssh.read_file(sftp, str(path), -4) == b"6789"
    assert ssh.read_file(sftp, str(path), -40) == b"0123456789"
    assert ssh.read_file(sftp, str(path), 2, 3) == b"234"
    assert ssh.read_file(sftp, str(tmp_path / "missing")) is None
    assert ssh.read_file(sftp, str(path)) == b"0123456789"     # within the default limit


def test_failure_tail_reads_only_the_end_of_a_big_log(tmp_path):
    lines = [f"debug line {i:06d} " + "x" * 80 for i in range(50000)]   # about 4.5 MB
    (tmp_path / remote.OUTPUT).write_text("\n".join(lines) + "\nERROR: disk /dev/vdz not found\n")
    (tmp_path / remote.EXIT_CODE).write_text("3\n")
    client = Client()
    st = remote.status(client, str(tmp_path), 0, 3)
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
        st = remote.status(client, str(tmp_path), offset, 5)
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
        st = remote.status(Client(), str(tmp_path), offset, 5)
        seen += [e["event"] for e in st["events"]]
        offset = st["events_offset"]
    assert "ok" in seen and seen[0] == "unparsed"


@pytest.mark.parametrize("name", [remote.OUTPUT, remote.LOG])
def test_tail_falls_back_to_the_log_when_output_is_empty(tmp_path, name):
    (tmp_path / remote.EXIT_CODE).write_text("4\n")
    (tmp_path / remote.OUTPUT).write_text("" if name == remote.LOG else "from output\n")
    (tmp_path / remote.LOG).write_text("from log\n")
    st = remote.status(Client(), str(tmp_path), 0, 5)
    assert st["tail"] == ("from log" if name == remote.LOG else "from output")


# A hostile ramdisk (or an image's hook that reached the job directory) serving endless or
# meaningless files: every read stops at its limit, and what is not an exit code says so.

@pytest.mark.parametrize("name", [remote.EXIT_CODE, remote.EVENTS, remote.OUTPUT])
def test_endless_files_are_read_to_their_limit_only(tmp_path, name):
    for other in (remote.EXIT_CODE, remote.EVENTS, remote.OUTPUT):
        if other != name:
            (tmp_path / other).write_text("4\n" if other == remote.EXIT_CODE else "")
    os.symlink("/dev/zero", tmp_path / name)
    client = Client()
    if name == remote.EXIT_CODE:
        with pytest.raises(remote.BadRamdisk, match="not an exit code"):
            remote.status(client, str(tmp_path), 0, 5)
        assert client.sftp.bytes_read <= remote.EXIT_CODE_BYTES + 1
        return
    st = remote.status(client, str(tmp_path), 0, 5)
    assert client.sftp.bytes_read <= remote.EVENTS_BYTES_PER_POLL + remote.TAIL_BYTES + 8
    if name == remote.EVENTS:
        assert [e["event"] for e in st["events"]] == ["unparsed"]
    else:
        assert st["exit_code"] == 4 and len(st["tail"]) <= remote.TAIL_BYTES


@pytest.mark.parametrize("text", ["done\n", "0; rm -rf /\n", "-1\n", "99999\n", "1 2\n"])
def test_an_exit_code_file_that_is_not_one_is_refused(tmp_path, text):
    (tmp_path / remote.EXIT_CODE).write_text(text)
    with pytest.raises(remote.BadRamdisk, match="not an exit code"):
        remote.status(Client(), str(tmp_path), 0, 5)


@pytest.mark.parametrize("text,code", [("0\n", 0), (" 4 \n", 4), ("", None), ("\n", None)])
def test_exit_codes_as_the_wrapper_writes_them(tmp_path, text, code):
    (tmp_path / remote.EXIT_CODE).write_text(text)
    assert remote.status(Client(), str(tmp_path), 0, 5)["exit_code"] == code


NODE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
OTHER = "2be26c0b-03f2-4d2e-ae87-c02d7f33c456"


def test_binding_of_this_node_with_its_current_token_is_accepted(tmp_path):
    from provision_agent import binding
    binding.write(str(tmp_path), NODE, "token-now")
    remote.verify_binding(Client(), str(tmp_path), NODE, "token-now")


@pytest.mark.parametrize("case,why", [
    ("missing", "no binding file for this node"),
    ("other-node", "no binding file for this node"),
    ("old-token", "another agent token"),
    ("forged-uuid", "names another node"),
    ("endless", "larger than"),
    ("garbage", "not JSON"),
])
def test_a_ramdisk_that_cannot_show_this_nodes_binding_is_refused(tmp_path, case, why):
    from provision_agent import binding
    if case == "other-node":
        binding.write(str(tmp_path), OTHER, "token-now")
    elif case == "old-token":
        binding.write(str(tmp_path), NODE, "token-of-an-earlier-deploy")
    elif case == "forged-uuid":
        # another node's record copied under this node's name
        (tmp_path / NODE).write_text(binding.render(OTHER, "token-now"))
    elif case == "endless":
        os.symlink("/dev/zero", tmp_path / NODE)
    elif case == "garbage":
        (tmp_path / NODE).write_bytes(b"\xff\xfe{")
    client = Client()
    with pytest.raises(remote.BadRamdisk, match=why) as err:
        remote.verify_binding(client, str(tmp_path), NODE, "token-now")
    assert f"not the ramdisk that looked up node {NODE}" in str(err.value)
    assert "token-now" not in str(err.value)
    assert client.sftp.bytes_read <= binding.MAX_BYTES + 1
