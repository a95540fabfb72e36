"""The image pipeline's parts on their own: zstd frame walking on real `zstd` output, checksum
parsing, the block writer's zero skipping and sizes, progress output, format commands, TLS."""

import bz2
import gzip
import io
import logging
import lzma
import os
import shutil
import ssl
import subprocess
import threading
import zlib

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from provision_agent.drivers.images import checksums, decompressors, formats, sources
from provision_agent.drivers.images.blockwrite import BLOCK, BlockWriter, InFlight
from provision_agent.drivers.images.pipeline import BlockRing, ReadAhead
from provision_agent.drivers.images.progress import Progress
from provision_agent.drivers.images.zstd_frames import FrameWalker
from provision_agent.errors import ImageError
from provision_agent.run.events import Events
from tests.unit.drivers.images.test_sources import Handler, Server
from tests.unit.fakes import FakeRunner

DATA = os.urandom(1 << 20) + bytes(3 << 20) + b"end"


def need(tool):
    """Skip without tool, except in CI where a missing prerequisite is a failure."""
    if not shutil.which(tool):
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is missing (scripts/host-packages.sh installs it)")
        pytest.skip(f"no {tool}")


def zstd_cli(data, *args):
    return subprocess.run(["zstd", "-q", "-c", *args], input=data, capture_output=True,
                          check=True).stdout


@pytest.mark.parametrize("args", [[], ["--no-check"], ["-19"], ["--long=27"]])
def test_frame_walker_on_cli_output(args):
    need("zstd")
    packed = zstd_cli(DATA, *args) + zstd_cli(b"second frame")
    walker = FrameWalker()
    for i in range(0, len(packed), 777):          # odd feed sizes cross every header
        walker.feed(packed[i:i + 777])
    assert walker.complete and walker.frames == 2
    for cut in (1, 4, len(packed) // 2):
        w = FrameWalker()
        w.feed(packed[:-cut])
        assert not w.complete


def test_skippable_frame_and_garbage():
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    w = FrameWalker()
    w.feed(skippable)
    assert w.complete is False      # no real frame yet: nothing was decompressed
    with pytest.raises(ValueError):
        FrameWalker().feed(b"garbage!")


def test_zstd_corrupt_is_image_error():
    packed = bytearray(decompressors.zstandard.ZstdCompressor(write_checksum=True).compress(DATA))
    packed[len(packed) // 2] ^= 0xFF
    reader = decompressors.open_decompressor("zstd", io.BytesIO(bytes(packed)))
    with pytest.raises(ImageError):
        while reader.read(1 << 20):
            pass


@pytest.mark.parametrize("head,name", [(b"\x1f\x8b\x08", "gzip"), (b"\xfd7zXZ\x00", "xz"),
                                       (b"BZh9", "bzip2"), (b"\x28\xb5\x2f\xfd", "zstd"),
                                       (b"\x00" * 8, "none"), (b"QFI\xfb", "none")])
def test_detect_by_magic(head, name):
    assert decompressors.detect(head) == name


def test_unknown_compression():
    with pytest.raises(ImageError, match="unknown compression 'lz4'"):
        decompressors.open_decompressor("lz4", io.BytesIO(b""))


@pytest.mark.parametrize("text,algo,expected", [
    ("SHA256:" + "A" * 64, None, ("sha256", "a" * 64)),
    ("b" * 32, "md5", ("md5", "b" * 32)),
    ("sha512:" + "c" * 128, None, ("sha512", "c" * 128)),
])
def test_checksum_parse(text, algo, expected):
    assert checksums.parse(text, algo) == expected


@pytest.mark.parametrize("text", ["sha1:" + "a" * 40, "sha256:abc", "md5:" + "g" * 32, "a" * 64])
def test_checksum_parse_rejects(text):
    with pytest.raises(ImageError):
        checksums.parse(text)


def test_block_writer_file_is_sparse_and_exact(tmp_path):
    target = tmp_path / "t"
    target.write_bytes(b"\xff" * (20 << 20))      # stale content must not survive
    writer = BlockWriter(str(target))
    blocks = [os.urandom(BLOCK), bytes(BLOCK), bytes(BLOCK // 2) + b"x" * 100]
    for block in blocks:
        writer.write(block)
    writer.finish()
    writer.close()
    assert target.read_bytes() == b"".join(blocks)
    assert writer.zero_bytes_skipped == BLOCK + (1 << 20) * 2
    assert os.stat(target).st_blocks * 512 < 2 * BLOCK      # the zero runs are holes


class _Chunks:
    """A stage that hands out its data in the given sizes, then fails if told to."""

    def __init__(self, data, sizes, fail=None):
        self._data, self._sizes, self._fail = data, list(sizes), fail

    def read(self, n):
        if not self._data and self._fail:
            raise self._fail
        size = min(n, self._sizes.pop(0) if self._sizes else n)
        out, self._data = self._data[:size], self._data[size:]
        return out

    def close(self):
        pass


@settings(max_examples=60, deadline=None)
@given(size=st.integers(0, 5000), sizes=st.lists(st.integers(1, 700), max_size=30),
       reads=st.lists(st.tuples(st.booleans(), st.integers(1, 900)), min_size=1, max_size=40))
def test_read_ahead_read_and_readinto_give_the_stream_back_in_order(size, sizes, reads):
    data = bytes(i % 251 for i in range(size))     # every offset tells itself apart
    ahead = ReadAhead(_Chunks(data, sizes), 512, depth=2)
    got, i = bytearray(), 0
    while True:
        into, n = reads[i % len(reads)]
        i += 1
        if into:
            buf = bytearray(n)
            k = ahead.readinto(memoryview(buf))
            assert k == n or len(got) + k == len(data)     # short only at the end
            got += buf[:k]
        else:
            k = len(chunk := ahead.read(n))
            assert k <= n
            got += chunk
        if not k:
            break
    ahead.close()
    assert bytes(got) == data


def test_read_ahead_readinto_raises_the_stage_error_after_the_data_before_it():
    ahead = ReadAhead(_Chunks(b"x" * 1000, [300], fail=ImageError("zstd data is corrupt")), 300)
    buf = memoryview(bytearray(4096))
    with pytest.raises(ImageError, match="corrupt"):
        ahead.readinto(buf)
    assert bytes(buf[:1000]) == b"x" * 1000
    ahead.close()


@settings(max_examples=40, deadline=None)
@given(size=st.integers(0, 5000), sizes=st.lists(st.integers(1, 700), max_size=30),
       count=st.integers(1, 3))
def test_block_ring_gives_the_stream_back_in_full_blocks_and_one_short_last(size, sizes, count):
    data = bytes(i % 251 for i in range(size))
    ring = BlockRing(_Chunks(data, sizes), 512, count=count)
    got = bytearray()
    while True:
        block, n = ring.next()
        got += block[:n]
        if n < 512:
            break
        assert n == 512                     # every block but the last is full
        ring.give_back(block)
    ring.close()
    assert bytes(got) == data


def test_block_ring_raises_the_stage_error_after_the_blocks_before_it():
    ring = BlockRing(_Chunks(b"x" * 1024, [300], fail=ImageError("gzip data is corrupt")), 512)
    for _ in range(2):
        block, n = ring.next()
        assert n == 512 and block[:n] == b"x" * 512
        ring.give_back(block)
    with pytest.raises(ImageError, match="corrupt"):
        ring.next()
    ring.close()


@settings(max_examples=40, deadline=None)
@given(size=st.integers(0, 3000), sizes=st.lists(st.integers(1, 700), max_size=20))
def test_block_ring_inspect_sees_every_block_before_the_consumer_and_the_last_once(size, sizes):
    data = bytes(i % 251 for i in range(size))
    seen, lasts = bytearray(), []

    def inspect(view, last):
        seen.extend(view)
        lasts.append(last)

    ring = BlockRing(_Chunks(data, sizes), 512, count=2, inspect=inspect)
    got = bytearray()
    while True:
        block, n = ring.next()
        assert len(seen) >= len(got) + n      # inspected before it was handed on
        got += block[:n]
        if n < 512:
            break
        ring.give_back(block)
    ring.close()
    assert bytes(got) == bytes(seen) == data
    assert lasts == [False] * (len(lasts) - 1) + [True]


def test_block_ring_raises_what_inspect_or_the_source_raised():
    def refuse(view, last):
        raise ImageError("the signature verifier stopped")

    ring = BlockRing(io.BytesIO(b"x" * 2000), 512, inspect=refuse)
    with pytest.raises(ImageError, match="verifier stopped"):
        ring.next()
    ring.close()
    ring = BlockRing(_Chunks(b"x" * 600, [300], fail=ImageError("connection dropped")), 512,
                     inspect=lambda view, last: None)
    block, n = ring.next()
    assert n == 512
    ring.give_back(block)
    with pytest.raises(ImageError, match="dropped"):
        ring.next()
    ring.close()


def test_block_writer_writes_a_ring_block_as_it_writes_its_own_buffer(tmp_path):
    target = tmp_path / "t"
    ring = BlockRing(io.BytesIO(DATA), BLOCK)
    writer = BlockWriter(str(target), target_zeroed=True)
    while True:
        block, n = ring.next()
        writer.write_block(block, n)
        if n < BLOCK:
            break
        ring.give_back(block)
    writer.finish()
    writer.close()
    ring.close()
    assert target.read_bytes() == DATA
    assert writer.zero_bytes_skipped == 3 << 20


def test_block_writer_writes_a_block_filled_in_place(tmp_path):
    import mmap
    target = tmp_path / "t"
    writer = BlockWriter(str(target))
    block = mmap.mmap(-1, BLOCK)
    data = os.urandom(1 << 20) + bytes(2 << 20) + os.urandom(1 << 20)
    block[:BLOCK] = data
    writer.write_block(block, BLOCK)
    block[:5] = b"tail!"
    writer.write_block(block, 5)
    writer.finish()
    writer.close()
    assert target.read_bytes() == data + b"tail!"
    assert writer.zero_bytes_skipped == 2 << 20


def _blocks(datas):
    import mmap
    out = []
    for data in datas:
        block = mmap.mmap(-1, BLOCK)
        block[:len(data)] = data
        out.append((block, len(data)))
    return out


def test_in_flight_writes_go_at_once_and_land_where_they_belong(tmp_path):
    target = tmp_path / "t"
    writer = BlockWriter(str(target), target_zeroed=True)
    met = threading.Barrier(2, timeout=10)
    plain = writer.write_at

    def write_at(block, n, offset):
        if offset < 2 * BLOCK:
            met.wait()      # the first two only get past this together
        return plain(block, n, offset)

    writer.write_at = write_at
    datas = [os.urandom(BLOCK), bytes(BLOCK), os.urandom(BLOCK), b"tail" * 1000 + b"!"]
    given_back = []
    writes = InFlight(writer, depth=2)
    for block, n in _blocks(datas):
        writes.submit(block, n, done=given_back.append)
    writes.drain()
    writer.finish()
    writes.close()
    writer.close()
    assert target.read_bytes() == b"".join(datas)
    assert writer.zero_bytes_skipped == BLOCK
    assert len(given_back) == len(datas)


def test_in_flight_raises_a_failed_write_and_waits_for_the_others(tmp_path):
    writer = BlockWriter(str(tmp_path / "t"))
    plain, finished = writer.write_at, []

    def write_at(block, n, offset):
        if offset == 0:
            raise ImageError("writing t at byte 0 failed: Input/output error")
        plain(block, n, offset)
        finished.append(offset)
        return 0

    writer.write_at = write_at
    writes = InFlight(writer, depth=2)
    blocks = _blocks([os.urandom(BLOCK)] * 3)
    with pytest.raises(ImageError, match="Input/output error"):
        for block, n in blocks:
            writes.submit(block, n)
        writes.drain()
    writes.close()
    assert finished == [BLOCK]      # the write beside the failed one ran to its end
    writer.close()


def test_block_writer_refuses_oversized_image(tmp_path):
    writer = BlockWriter(str(tmp_path / "t"))
    writer.capacity = BLOCK                         # as a block device of one block would
    writer.write(os.urandom(BLOCK))
    with pytest.raises(ImageError, match="does not fit"):
        writer.write(b"more")
    writer.close()


def test_progress_log_lines_and_events(caplog):
    stream = io.StringIO()
    events = Events([stream])
    progress = Progress(events, total=100, stream=io.StringIO())
    with caplog.at_level(logging.INFO):
        progress.update(50)
        progress.update(100)
        progress.finish()
    assert '"bytes": 100' in stream.getvalue() and '"total": 100' in stream.getvalue()
    assert any("(100%)" in r.getMessage() for r in caplog.records)


def test_progress_bar_on_tty():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    progress = Progress(None, total=4 << 20, stream=out)
    progress.update(2 << 20)
    progress.finish()
    assert "[" + "#" * 15 + "-" * 15 + "]" in out.getvalue() or "#" * 30 in out.getvalue()
    assert out.getvalue().endswith("\n")


@pytest.mark.parametrize("fs,expect", [
    ("ext4", [["e2fsck", "-f", "-y", "/dev/x"], ["resize2fs", "/dev/x"]]),
    ("xfs", [["mount", "-t", "xfs", "/dev/x"], ["xfs_growfs"], ["umount"]]),
    ("btrfs", [["mount", "-t", "btrfs", "/dev/x"], ["btrfs", "filesystem", "resize", "max"],
               ["umount"]]),
])
def test_grow_commands(fs, expect):
    runner = FakeRunner()
    formats.grow_fs(runner, "/dev/x", fs)
    assert len(runner.calls) == len(expect)
    for call, prefix in zip(runner.calls, expect):
        assert call[:len(prefix)] == prefix


def test_grow_detects_type_and_refuses_none():
    runner = FakeRunner({"blkid": "ext4\n"})
    assert formats.grow_fs(runner, "/dev/x") == "ext4"
    with pytest.raises(ImageError, match="no filesystem"):
        formats.grow_fs(FakeRunner({"blkid": ""}), "/dev/x")


def test_reread_falls_back_to_partprobe():
    runner = FakeRunner(fail=("blockdev --rereadpt",))
    formats.reread_partitions(runner, "/dev/sda")
    assert runner.lines() == ["blockdev --rereadpt /dev/sda", "partprobe /dev/sda",
                              "udevadm settle"]


def fake_sysfs(tmp_path, write_zeroes="4294967296", rotational="0"):
    disk = tmp_path / "devices" / "vda"
    (disk / "queue").mkdir(parents=True)
    (disk / "vda2").mkdir()
    (disk / "queue" / "write_zeroes_max_bytes").write_text(write_zeroes + "\n")
    (disk / "queue" / "rotational").write_text(rotational + "\n")
    block = tmp_path / "class" / "block"
    block.mkdir(parents=True)
    (block / "vda").symlink_to(disk)
    (block / "vda2").symlink_to(disk / "vda2")
    return str(block)


SIZE = {"blockdev --getsize64": "1073741824\n"}


def test_zero_device_unmaps_a_partition_through_its_disks_queue(tmp_path):
    runner = FakeRunner(SIZE)
    assert formats.zero_device(runner, "/dev/vda2", "auto", fake_sysfs(tmp_path))
    assert runner.writes() == ["fallocate --punch-hole --offset 0 --length 1073741824 /dev/vda2"]


@pytest.mark.parametrize("policy,write_zeroes,rotational,zeroed", [
    ("auto", "0", "0", False),          # no write-zeroes: the kernel would write zero pages
    ("auto", "4096", "1", False),       # rotational: WRITE SAME may write every block
    ("always", "4096", "1", True),
    ("always", "0", "0", False),
    ("never", "4096", "0", False),
])
def test_zero_device_policy(tmp_path, policy, write_zeroes, rotational, zeroed):
    runner = FakeRunner(SIZE)
    sysfs = fake_sysfs(tmp_path, write_zeroes, rotational)
    assert formats.zero_device(runner, "/dev/vda", policy, sysfs) is zeroed
    assert bool(runner.writes()) is zeroed


def test_zero_device_failure_means_not_zeroed(tmp_path):
    runner = FakeRunner(SIZE, fail=("fallocate",))
    assert formats.zero_device(runner, "/dev/vda", "auto", fake_sysfs(tmp_path)) is False


def test_zero_device_unknown_device_is_not_zeroed(tmp_path):
    runner = FakeRunner(SIZE)
    assert formats.zero_device(runner, "/dev/nope", "always", fake_sysfs(tmp_path)) is False
    assert runner.calls == []


@pytest.fixture
def https_server(tmp_path):
    need("openssl")
    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    srv = Server(("127.0.0.1", 0), Handler)
    srv.files, srv.rules, srv.requests = {"a": DATA}, {}, []
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.url = f"https://127.0.0.1:{srv.server_address[1]}/a"
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv, str(cert)
    srv.shutdown()
    srv.server_close()


def _read(src):
    out = b""
    while data := src.read(1 << 20):
        out += data
    return out


def test_https_verified_by_default_with_ca_bundle_or_insecure(https_server):
    srv, cert = https_server
    with pytest.raises(ImageError, match="TLS verification failed"):
        sources.open_source(srv.url)
    assert _read(sources.open_source(srv.url, ca_bundle=cert)) == DATA
    assert _read(sources.open_source(srv.url, tls_verify=False)) == DATA


GZIP_BACKENDS = [pytest.param(name, id=name) for name in decompressors.GZIP_BACKENDS]


def _drain(reader, into):
    """Everything reader gives, through readinto() or read()."""
    if not into:
        return b"".join(iter(lambda: reader.read(1 << 16), b""))
    out, view = bytearray(), memoryview(bytearray(1 << 16))
    while k := reader.readinto(view):
        out += view[:k]
    return bytes(out)


class _NoReadinto:
    """A source with read() only, as a plugin's may be."""

    def __init__(self, data):
        self._f = io.BytesIO(data)

    def read(self, n):
        return self._f.read(n)

    def close(self):
        pass


@pytest.mark.parametrize("into", [False, True], ids=["read", "readinto"])
@pytest.mark.parametrize("name", GZIP_BACKENDS)
def test_every_gzip_backend_reads_members_and_refuses_truncation_and_corruption(name, into):
    backend = decompressors.gzip_backend((name,))
    assert backend.__name__ == name, f"{name} must be installed where the tests run"
    two = gzip.compress(DATA) + gzip.compress(b"second member")
    reader = decompressors.Gzip(_NoReadinto(two), backend=backend)
    assert _drain(reader, into) == DATA + b"second member"
    assert reader.bytes_in == len(two)
    for cut, why in ((two[:len(two) // 3], "truncated"), (two[:-3], "truncated"),
                     (b"", "truncated"), (two + b"junk after the end", "truncated|corrupt")):
        with pytest.raises(ImageError, match=why):
            _drain(decompressors.Gzip(io.BytesIO(cut), backend=backend), into)
    bad = bytearray(gzip.compress(DATA))
    bad[len(bad) // 2] ^= 0xFF
    with pytest.raises(ImageError, match="corrupt"):
        _drain(decompressors.Gzip(io.BytesIO(bytes(bad)), backend=backend), into)


@pytest.mark.parametrize("name,packed", [
    ("xz", lzma.compress(DATA)), ("bzip2", bz2.compress(DATA)),
    ("zstd", zstandard.ZstdCompressor().compress(DATA)), ("none", DATA)])
def test_every_decompressor_fills_a_buffer_in_place(name, packed):
    reader = decompressors.open_decompressor(name, _NoReadinto(packed))
    assert _drain(reader, True) == DATA


def test_gzip_backend_is_the_first_that_imports(monkeypatch):
    import sys
    assert decompressors.gzip_backend().__name__ == decompressors.GZIP_BACKENDS[0]
    for name in ("zlib_ng", "zlib_ng.zlib_ng"):
        monkeypatch.setitem(sys.modules, name, None)       # as if not installed
    assert decompressors.gzip_backend().__name__ == "isal.isal_zlib"
    for name in ("isal", "isal.isal_zlib"):
        monkeypatch.setitem(sys.modules, name, None)
    assert decompressors.gzip_backend() is zlib
    assert decompressors.Gzip(io.BytesIO(b"")).backend is zlib


def test_a_qcow2_spool_that_fills_tmp_is_an_image_error_saying_what_to_do(monkeypatch, tmp_path):
    import errno

    class Full(io.BytesIO):
        name = str(tmp_path / "provision-image-x.qcow2")

        def write(self, data):
            if self.tell() + len(data) > 3 << 20:
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().write(data)

    monkeypatch.setattr(formats.tempfile, "NamedTemporaryFile", lambda **kw: Full())
    with pytest.raises(ImageError) as exc:
        formats.spool(io.BytesIO(bytes(8 << 20)), 1 << 20)
    assert f"{tmp_path} (RAM in the ramdisk) filled up after 3 MiB" in str(exc.value)
    assert "provide the image as raw" in str(exc.value)
