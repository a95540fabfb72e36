"""The first block of the disk a whole-disk image holds, read before the run writes anything.

The preflight checks a whole-disk image's partition table against its disk's sector size
(image_sectors.py) before the plan's first step, so that an image that cannot boot there is
refused while the disk still holds what it held (the plan's wipe comes first). Only the head
of the image is fetched, and the download is closed there:

- a disk image (raw, or compressed: decompressed as the writer does): its first BLOCK bytes,
  the block the writer checks again as it streams the image;
- a qcow2 converted onto a whole disk: the file's first QCOW2_SPOOL bytes, spooled and checked
  as the writer checks a qcow2 (qcow2.info: self-contained, under qemu-img's limits), then
  qemu-img dd reads the disk's first BLOCK bytes out of it. The metadata and the first
  clusters of a converted image sit at the file's start; disk data stored past the spooled
  part reads as zeros, which tell nothing (let through: the writer checks the whole image).

Bounds: at most MAX_IN bytes of the source (compressed) and SECONDS in all, checked on each
read of the source besides its own per-read and stall timeouts (sources.py). When the head
cannot be read within them, the log says so and the writer's check is the one that decides.
Nothing here is trusted beyond telling the table's sector size: the image is checked
(checksum, signature) when it is written.
"""

import logging
import os
import tempfile
import time

from provision_agent import redact
from provision_agent.drivers.images import decompressors, qcow2, sources
from provision_agent.drivers.images.blockwrite import BLOCK
from provision_agent.drivers.images.pipeline import Peek
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

MAX_IN = 64 << 20           # source bytes read at most (a compressed head needs a few MiB)
QCOW2_SPOOL = 16 << 20      # of a qcow2 file: its header, tables and first clusters
SECONDS = 120               # for the whole head, beside the source's own timeouts
CHUNK = 1 << 20


class _OutOfBounds(Exception):
    """The head was not read within MAX_IN bytes or SECONDS."""


class _Bounded:
    """The source, read within a byte budget and a deadline."""

    def __init__(self, reader, max_in, seconds):
        self._src, self.count = reader, 0
        self._max_in, self._deadline = max_in, time.monotonic() + seconds
        self._seconds = seconds

    def read(self, n):
        if time.monotonic() > self._deadline:
            raise _OutOfBounds(f"not read within {self._seconds} s")
        n = min(n, self._max_in - self.count)
        if n <= 0:
            raise _OutOfBounds(f"not found in its first {self._max_in} bytes")
        data = self._src.read(n)
        self.count += len(data)
        return data

    def close(self):
        self._src.close()


def read(uri, fmt, *, compression="auto", runner, tmp_dir=None, max_in=MAX_IN,
         seconds=SECONDS, **source_opts):
    """The first BLOCK bytes of the disk the image at uri holds (fewer for a shorter image),
    or None when they cannot be read within the bounds. fmt: disk or qcow2; source_opts: as
    sources.open_source takes them. A source that cannot be read, data that is corrupt or a
    qcow2 that is not self-contained is an ImageError, as it is when written."""
    shown = redact.url(uri)
    top = _Bounded(sources.open_source(uri, **source_opts), max_in, seconds)
    try:
        top = net = Peek(top)
        if compression in (None, "auto"):
            compression = decompressors.detect(net.peek(8))
        top = decompressors.open_decompressor(compression, net)
        if fmt == "qcow2":
            return _qcow2_head(top, runner, tmp_dir, shown)
        return _read_full(top, BLOCK)
    except _OutOfBounds as exc:
        LOG.warning("image %s: the head of its disk was %s before the run; its partition "
                    "table is checked as it is written", shown, exc)
        return None
    finally:
        top.close()


def _read_full(reader, n):
    out = bytearray()
    while len(out) < n:
        data = reader.read(min(CHUNK, n - len(out)))
        if not data:
            break
        out += data
    return bytes(out)


def _qcow2_head(reader, runner, tmp_dir, shown):
    """The disk's first BLOCK bytes out of the qcow2 file's first QCOW2_SPOOL bytes."""
    with tempfile.TemporaryDirectory(prefix="provision-head-", dir=tmp_dir) as where:
        path = os.path.join(where, "head.qcow2")
        data = _read_full(reader, QCOW2_SPOOL)
        whole = len(data) < QCOW2_SPOOL or not reader.read(1)
        with open(path, "wb") as f:
            f.write(data)
        try:
            qcow2.check_header(path)        # refused when written: refused now
        except ImageError as exc:
            raise ImageError(f"image {shown}: {exc}") from None
        try:
            qcow2.info(runner, path)
            return qcow2.head(runner, path, BLOCK, tmp_dir)
        except ImageError as exc:
            if whole:
                raise ImageError(f"image {shown}: {exc}") from None
            # qemu-img read a cut-off copy: what it missed tells nothing of the image
            LOG.warning("image %s: the head of its disk could not be read out of the first "
                        "%d bytes of the qcow2 (%s); its partition table is checked as it is "
                        "written", shown, len(data), exc)
            return None
