"""blockwrite's zero runs on a target not known to be zeroed: handed to the device's
write-zeroes (BLKZEROOUT) a run at a time, written as data once the device refuses it, an
error of the device's an ImageError. A file stands in for the block device; the ioctl is
replaced by one that zeroes the range through another descriptor, as the kernel would."""

import errno
import os

import pytest

from provision_agent.drivers.images import blockwrite
from provision_agent.drivers.images.blockwrite import BLKZEROOUT, BLOCK, BlockWriter, InFlight
from provision_agent.drivers.images.buffers import Block
from provision_agent.errors import ImageError

MiB = 1 << 20


@pytest.fixture
def device(tmp_path, monkeypatch):
    """(writer, calls): a BlockWriter over 16 MiB of 0xff that zeroes runs like a device with
    write-zeroes; calls lists each (offset, length) the ioctl was given."""
    path = tmp_path / "dev"
    writer = BlockWriter(str(path))
    with open(path, "r+b") as f:
        f.write(b"\xff" * (16 * MiB))
    # what a block device gets: not emptied at open, not cut to size at the end
    writer.target_zeroed, writer.zero_out, writer.is_file = False, True, False
    calls = []

    def ioctl(fd, request, arg):
        assert fd == writer.fd and request == BLKZEROOUT
        offset, length = int.from_bytes(arg[:8], "little"), int.from_bytes(arg[8:], "little")
        calls.append((offset, length))
        with open(path, "r+b") as f:
            f.seek(offset)
            f.write(bytes(length))

    monkeypatch.setattr(blockwrite.fcntl, "ioctl", ioctl)
    yield writer, calls
    writer.close()


def _write(writer, datas):
    blocks = []
    writes = InFlight(writer, depth=2)
    for data in datas:
        block = Block(BLOCK)
        block.view[:len(data)] = data
        blocks.append(block)
        writes.submit(block.view, len(data))
    writes.drain()
    writer.finish()
    writes.close()
    for block in blocks:
        block.close()


def test_zero_runs_go_to_write_zeroes_one_call_a_run_and_the_data_is_written(device):
    writer, calls = device
    data = os.urandom(MiB)
    datas = [data + bytes(2 * MiB) + data,                 # a run inside a block
             bytes(BLOCK),                                  # a run across two blocks
             bytes(MiB) + data + bytes(MiB) + b"\0" * 512,  # ... and on; the short tail is data
             ]
    _write(writer, datas)
    with open(writer.path, "rb") as f:
        got = f.read(16 * MiB)
    image = b"".join(datas)
    assert got[:len(image)] == image
    assert got[len(image):] == b"\xff" * (16 * MiB - len(image))     # nothing past the image
    assert sorted(calls) == [(MiB, 2 * MiB), (4 * MiB, BLOCK), (8 * MiB, MiB),
                             (10 * MiB, MiB)]
    assert writer.zero_bytes_zeroed == 8 * MiB and writer.zero_bytes_skipped == 0


def test_a_device_that_refuses_write_zeroes_gets_its_zeros_written(device, monkeypatch):
    writer, calls = device

    def refuse(fd, request, arg):
        calls.append(request)
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(blockwrite.fcntl, "ioctl", refuse)
    data = os.urandom(MiB)
    _write(writer, [bytes(2 * MiB) + data + bytes(MiB), bytes(BLOCK)])
    with open(writer.path, "rb") as f:
        assert f.read(2 * BLOCK) == bytes(2 * MiB) + data + bytes(MiB) + bytes(BLOCK)
    assert calls == [BLKZEROOUT]            # asked once, then written as data
    assert not writer.zero_out and writer.zero_bytes_zeroed == 0


def test_a_device_error_while_zeroing_is_an_image_error(device, monkeypatch):
    writer, _ = device

    def fail(fd, request, arg):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(blockwrite.fcntl, "ioctl", fail)
    block = Block(BLOCK)
    try:
        with pytest.raises(ImageError, match="zeroing .* at byte 0 failed: Input/output error"):
            writer.write_block(block.view, BLOCK)
    finally:
        block.close()


def test_a_file_target_seeks_over_its_zeros_and_never_asks_the_device(tmp_path, monkeypatch):
    monkeypatch.setattr(blockwrite.fcntl, "ioctl", lambda *a: pytest.fail("ioctl on a file"))
    writer = BlockWriter(str(tmp_path / "t"))
    assert writer.target_zeroed and not writer.zero_out
    _write(writer, [bytes(BLOCK), os.urandom(100)])
    assert writer.zero_bytes_skipped == BLOCK and writer.zero_bytes_zeroed == 0
    writer.close()
