"""Streaming decompressors as readers: read(n) returns at most n decompressed bytes.

Output is bounded per call because images carry long zero runs that inflate a few KiB into
GiBs. 'auto' looks at the magic bytes, never at the file name. A stream that ends before its
compressed end marker is an ImageError (a truncated download must never look like success).
Plugins: stevedore namespace `provision_agent.decompressors` (a callable(reader) -> reader).
zlib, lzma, bz2 and zstandard release the GIL, so a decompress thread overlaps the others.
gzip inflates through zlib-ng (PyPI zlib-ng, a dependency, and in the ramdisk) where it imports,
else ISA-L (PyPI isal), else the standard zlib: the same stream format at 2.3-2.5x zlib's speed
(benchmarks/gzip_inflate.py; zlib-ng measured ~8 % ahead of ISA-L in our reader).
"""

import bz2
import importlib
import logging
import lzma
import zlib

import zstandard

from provision_agent.drivers.images.zstd_frames import FrameWalker
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

NAMESPACE = "provision_agent.decompressors"
# Fastest first (measured: benchmarks/gzip_inflate.py); each has zlib's decompressobj API.
GZIP_BACKENDS = ("zlib_ng.zlib_ng", "isal.isal_zlib", "zlib")
IN_CHUNK = 1 << 20
MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"BZh", "bzip2"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)


def detect(head):
    for magic, name in MAGIC:
        if head.startswith(magic):
            return name
    return "none"


def gzip_backend(names=GZIP_BACKENDS):
    """The first of names that imports: a module with zlib's decompressobj()/error."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            LOG.debug("gzip backend %s is not installed", name)
    return zlib


class _Multi:
    """gzip/xz/bzip2 share one shape: a decompressor object with max_length and eof, restarted
    for concatenated members (pigz -i, pbzip2 and `cat a.gz b.gz` produce several)."""

    name = "?"
    _error = zlib.error

    def __init__(self, reader):
        self._src = reader
        self._obj = self._new()
        self._pending = b""
        self.bytes_in = 0

    def _feed(self, data, n):
        raise NotImplementedError

    def read(self, n):
        while True:
            if self._obj.eof:
                rest = self._obj.unused_data or self._src.read(IN_CHUNK)
                if not rest:
                    return b""
                self._obj, self._pending = self._new(), rest
                self.bytes_in += len(rest)
            if not self._pending and self._needs_input():
                self._pending = self._src.read(IN_CHUNK)
                self.bytes_in += len(self._pending)
                if not self._pending:
                    raise ImageError(f"{self.name} stream is truncated: input ended "
                                     "before the end of the compressed data")
            try:
                out = self._feed(n)
            except (zlib.error, self._error, lzma.LZMAError, OSError, EOFError) as exc:
                raise ImageError(f"{self.name} data is corrupt: {exc}") from exc
            if out:
                return out

    def close(self):
        self._src.close()


class Gzip(_Multi):
    name = "gzip"

    def __init__(self, reader, backend=None):
        self.backend = backend or gzip_backend()
        self._error = self.backend.error
        super().__init__(reader)

    def _new(self):
        return self.backend.decompressobj(wbits=16 + zlib.MAX_WBITS)

    def _needs_input(self):
        return not self._obj.unconsumed_tail

    def _feed(self, n):
        data = self._obj.unconsumed_tail or self._pending
        self._pending = b""
        return self._obj.decompress(data, n)


class _NeedsInput(_Multi):
    def _needs_input(self):
        return self._obj.needs_input

    def _feed(self, n):
        data, self._pending = self._pending, b""
        return self._obj.decompress(data, n)


class Xz(_NeedsInput):
    name = "xz"

    def _new(self):
        return lzma.LZMADecompressor()


class Bzip2(_NeedsInput):
    name = "bzip2"

    def _new(self):
        return bz2.BZ2Decompressor()


class Zstd:
    name = "zstd"

    def __init__(self, reader):
        self._src = reader
        self._walker = FrameWalker()
        self.bytes_in = 0
        self._reader = zstandard.ZstdDecompressor().stream_reader(
            _Pull(self._raw_read), read_size=IN_CHUNK, read_across_frames=True)

    def read(self, n):
        """For the caller: decompressed bytes. Truncation is checked at the end of input."""
        try:
            out = self._reader.read(n)
        except zstandard.ZstdError as exc:
            raise ImageError(f"zstd data is corrupt: {exc}") from exc
        if not out and not self._walker.complete:
            raise ImageError("zstd stream is truncated: input ended before the end of a frame")
        return out

    def _raw_read(self, n):
        data = self._src.read(n)
        self.bytes_in += len(data)
        try:
            self._walker.feed(data)
        except ValueError as exc:
            raise ImageError(f"zstd data is corrupt: {exc}") from exc
        return data

    def close(self):
        self._src.close()


class _Pull:
    """What zstandard's stream_reader pulls compressed bytes from (it calls read(n))."""

    def __init__(self, read):
        self.read = read


class Passthrough:
    name = "none"

    def __init__(self, reader):
        self._src = reader
        self.bytes_in = 0

    def read(self, n):
        data = self._src.read(n)
        self.bytes_in += len(data)
        return data

    def close(self):
        self._src.close()


BUILTIN = {"none": Passthrough, "gzip": Gzip, "xz": Xz, "bzip2": Bzip2, "zstd": Zstd}


def open_decompressor(name, reader):
    """Wrap reader; name is one of BUILTIN or a plugin; 'auto' must be resolved first."""
    cls = BUILTIN.get(name)
    if cls is None:
        try:
            from stevedore import driver
            cls = driver.DriverManager(NAMESPACE, name, invoke_on_load=False).driver
        except Exception:
            raise ImageError(f"unknown compression {name!r} "
                             f"(known: auto, {', '.join(sorted(BUILTIN))})") from None
    return cls(reader)
