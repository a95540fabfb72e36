"""Streaming decompressors as readers: read(n) returns at most n decompressed bytes.

Output is bounded per call because images carry long zero runs that inflate a few KiB into
GiBs. 'auto' looks at the magic bytes, never at the file name. A stream that ends before its
compressed end marker is an ImageError (a truncated download must never look like success).
Plugins: stevedore namespace `provision_agent.decompressors` (a callable(reader) -> reader).
zlib, lzma, bz2 and zstandard release the GIL, so a decompress thread overlaps the others.
gzip inflates through zlib-ng (PyPI zlib-ng, a dependency, and in the ramdisk) where it imports,
else ISA-L (PyPI isal), else the standard zlib: the same stream format at 2.3-2.5x zlib's speed
(benchmarks/gzip_inflate.py; zlib-ng measured ~8 % ahead of ISA-L in our reader). Both of those
have a gzip reader in C whose readinto() inflates straight into the caller's block; every
reader here has readinto() so the writer's blocks are filled in place (pipeline.BlockRing).
"""

import bz2
import importlib
import io
import logging
import lzma
import zlib

import zstandard

from provision_agent.drivers.images.pipeline import read_into
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
                rest = self._obj.unused_data
                if not rest:
                    rest = self._src.read(IN_CHUNK)
                    self.bytes_in += len(rest)
                if not rest:
                    return b""
                self._obj, self._pending = self._new(), rest
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

    def readinto(self, view):
        out = self.read(len(view))
        view[:len(out)] = out
        return len(out)

    def close(self):
        self._src.close()


class _Counted(io.RawIOBase):
    """The compressed input as a C gzip reader pulls it (readinto), counted. An io.RawIOBase:
    zlib-ng's reader takes any other object for a bytes-like one and crashes on it (double
    free, zlib-ng 1.1.0), isal's raises TypeError."""

    def __init__(self, reader):
        super().__init__()
        self._src = reader
        self.bytes_in = 0

    def readable(self):
        return True

    def readinto(self, view):
        n = read_into(self._src, view)
        self.bytes_in += n
        return n

    def close(self):
        if not self.closed:         # io's finaliser closes again at garbage collection
            super().close()
            self._src.close()


class Gzip:
    """gzip through the backend's C reader (multi-member, CRC and length checked, inflating
    into the caller's buffer) where it has one, else through zlib's decompressobj."""

    name = "gzip"

    def __init__(self, reader, backend=None):
        self.backend = backend or gzip_backend()
        native = getattr(self.backend, "_GzipReader", None)
        if native is None:
            self._impl = _ZlibGzip(reader, self.backend)
            self._counted = self._impl
        else:
            self._counted = _Counted(reader)
            self._impl = native(self._counted, IN_CHUNK)

    @property
    def bytes_in(self):
        return self._counted.bytes_in

    def read(self, n):
        return self._call(self._impl.read, n)

    def readinto(self, view):
        return self._call(self._impl.readinto, view)

    def _call(self, fn, arg):
        try:
            out = fn(arg)
        except ImageError:
            raise
        except EOFError:
            raise ImageError("gzip stream is truncated: input ended before the end of the "
                             "compressed data") from None
        except (self.backend.error, zlib.error, OSError) as exc:
            raise ImageError(f"gzip data is corrupt: {exc}") from exc
        if not out and not self.bytes_in:
            raise ImageError("gzip stream is truncated: the input is empty")
        return out

    def close(self):
        self._counted.close()


class _ZlibGzip(_Multi):
    name = "gzip"

    def __init__(self, reader, backend):
        self._error = backend.error
        self._backend = backend
        super().__init__(reader)

    def _new(self):
        return self._backend.decompressobj(wbits=16 + zlib.MAX_WBITS)

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
        return self._call(self._reader.read, n)

    def readinto(self, view):
        return self._call(self._reader.readinto, view)

    def _call(self, fn, arg):
        try:
            out = fn(arg)
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

    def readinto(self, view):
        n = read_into(self._src, view)
        self.bytes_in += n
        return n

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
