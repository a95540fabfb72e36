"""The head of a whole-disk image's disk, read before the run: only as much of the source as
it takes, within a byte budget and a deadline, and the download closed there."""

import gzip
import os
import struct
import time

import pytest

from provision_agent.drivers.images import disk_head, sources
from provision_agent.drivers.images.blockwrite import BLOCK
from provision_agent.errors import CommandError, ImageError

MiB = 1 << 20


class Counted:
    """A source that counts what is read of it and whether it was closed."""

    def __init__(self, data=None, endless=False, delay=0.0):
        self.data, self.endless, self.delay = data, endless, delay
        self.count, self.closed = 0, False

    def read(self, n):
        time.sleep(self.delay)
        if self.endless:
            out = os.urandom(min(n, 64 << 10))
        else:
            out = self.data[self.count:self.count + n]
        self.count += len(out)
        return out

    def close(self):
        self.closed = True


@pytest.fixture
def served(monkeypatch):
    """serve(source) -> the source disk_head opens, whatever the URI."""
    def serve(source):
        monkeypatch.setattr(sources, "open_source", lambda uri, **opts: source)
        return source
    return serve


def test_a_raw_disk_image_gives_its_first_block_and_no_more(served):
    data = os.urandom(BLOCK) + os.urandom(MiB) * 8
    src = served(Counted(data))
    assert disk_head.read("http://h/disk.img", "disk", runner=None) == data[:BLOCK]
    assert src.count == BLOCK and src.closed


def test_a_gzip_image_is_inflated_to_its_first_block(served):
    data = os.urandom(BLOCK + 8 * MiB)
    src = served(Counted(gzip.compress(data, 1)))
    assert disk_head.read("http://h/disk.img.gz", "disk", runner=None) == data[:BLOCK]
    # the block, and what the decompressor had read ahead (1 MiB at a time)
    assert src.count <= BLOCK + 2 * MiB and src.closed


def test_an_image_shorter_than_a_block_is_read_whole(served):
    served(Counted(b"\x55\xaa" * 1000))
    assert disk_head.read("file:///disk.img", "disk", runner=None) == b"\x55\xaa" * 1000


def test_no_more_than_max_in_bytes_are_read(served, caplog):
    src = served(Counted(endless=True))
    assert disk_head.read("http://h/x.img", "disk", runner=None, max_in=MiB) is None
    assert src.count == MiB and src.closed
    assert f"not found in its first {MiB} bytes" in caplog.text


def test_a_slow_source_is_given_up_at_the_deadline(served, caplog):
    src = served(Counted(endless=True, delay=0.05))
    start = time.monotonic()
    assert disk_head.read("http://h/x.img", "disk", runner=None, seconds=0.3) is None
    assert time.monotonic() - start < 2 and src.closed
    assert "not read within 0.3 s" in caplog.text


def test_a_source_that_cannot_be_read_is_an_image_error(tmp_path):
    with pytest.raises(ImageError, match="cannot open"):
        disk_head.read(str(tmp_path / "missing.img"), "disk", runner=None)


def qcow2_header(backing=0):
    head = bytearray(512)
    head[:4] = b"QFI\xfb"
    struct.pack_into(">IQI", head, 4, 3, backing, 8 if backing else 0)
    struct.pack_into(">I", head, 20, 16)            # cluster bits
    return bytes(head)


class Refusing:
    """A runner whose qemu-img cannot read the image (a cut-off copy, say)."""

    def __init__(self):
        self.calls = []

    def run(self, argv, **kw):
        self.calls.append(argv)
        raise CommandError(argv, 1, stderr="qcow2: image is truncated")


def test_a_qcow2_naming_a_backing_file_is_refused_before_qemu_img_reads_it(served):
    served(Counted(qcow2_header(backing=512)))
    runner = Refusing()
    with pytest.raises(ImageError, match="image http://h/x.qcow2: the qcow2 image names a "
                                         "backing file"):
        disk_head.read("http://h/x.qcow2", "qcow2", runner=runner)
    assert runner.calls == []


def test_a_qcow2_qemu_img_cannot_read_from_its_cut_off_head_tells_nothing(served,
                                                                           monkeypatch,
                                                                           caplog):
    monkeypatch.setattr(disk_head, "QCOW2_SPOOL", 4096)
    served(Counted(qcow2_header() + bytes(8192)))
    assert disk_head.read("http://h/x.qcow2", "qcow2", runner=Refusing()) is None
    assert "could not be read out of the first 4096 bytes of the qcow2" in caplog.text


def test_a_whole_qcow2_qemu_img_cannot_read_is_an_image_error(served):
    served(Counted(qcow2_header() + bytes(4096)))
    with pytest.raises(ImageError, match="image http://h/x.qcow2: qemu-img cannot read"):
        disk_head.read("http://h/x.qcow2", "qcow2", runner=Refusing())
