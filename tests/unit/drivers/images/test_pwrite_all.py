"""blockwrite.pwrite_all: a short pwrite is carried on from where it stopped; none at all is a
full device, not a loop."""

import errno
import os

import pytest

from provision_agent.drivers.images import blockwrite


def test_short_writes_are_finished_in_order(tmp_path, monkeypatch):
    path = tmp_path / "target"
    path.write_bytes(b"-" * 16)
    real, calls = os.pwrite, []

    def at_most_three(fd, data, offset):
        calls.append(offset)
        return real(fd, bytes(data)[:3], offset)

    monkeypatch.setattr(blockwrite.os, "pwrite", at_most_three)
    fd = os.open(path, os.O_WRONLY)
    try:
        blockwrite.pwrite_all(fd, b"abcdefgh", 4)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"----abcdefgh----"
    assert calls == [4, 7, 10]


def test_a_write_of_nothing_is_enospc(tmp_path, monkeypatch):
    monkeypatch.setattr(blockwrite.os, "pwrite", lambda fd, data, offset: 0)
    fd = os.open(tmp_path / "target", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError) as got:
            blockwrite.pwrite_all(fd, b"abc", 0)
    finally:
        os.close(fd)
    assert got.value.errno == errno.ENOSPC
