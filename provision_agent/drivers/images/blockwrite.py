"""Write a stream of bytes to a block device or file: big aligned O_DIRECT writes, zero skipping.

O_DIRECT keeps a multi-GiB image from flushing the ramdisk's page cache and lets the disk see
large sequential writes; where the target refuses it (tmpfs, some loop setups) we fall back to
buffered writes. When the caller says the target is already zeroed, all-zero pieces are seeked
over. A block's piece is copied to bytes and compared with a zero bytes object: a memcpy and a
memcmp (~20 GB/s measured here), where comparing the memoryview itself or any() is 40x slower.
"""

import collections
import errno
import fcntl
import logging
import os
import stat
from concurrent.futures import ThreadPoolExecutor

from provision_agent.drivers.images.buffers import Block
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

BLOCK = 4 << 20         # one write; a multiple of every logical block size
ZERO_GRAIN = 1 << 20    # zero runs are detected and skipped at this granularity
_ZERO = bytes(ZERO_GRAIN)
ALIGN = 4096
IN_FLIGHT = 2           # writes at once (InFlight)


def pwrite_all(fd, view, offset):
    """All of view at offset: pwrite may write less than asked (a signal, a device's limit)."""
    view = memoryview(view)
    while len(view):
        done = os.pwrite(fd, view, offset)
        if done <= 0:
            raise OSError(errno.ENOSPC, "short write")
        view, offset = view[done:], offset + done


class BlockWriter:
    def __init__(self, path, *, target_zeroed=False, direct=True):
        self.path = path
        self.target_zeroed = target_zeroed
        self.offset = 0
        self.zero_bytes_skipped = 0
        flags = os.O_WRONLY | os.O_CLOEXEC
        is_new = not os.path.exists(path)
        if is_new:
            flags |= os.O_CREAT
        self.fd = self._open(path, flags, direct)
        st = os.fstat(self.fd)
        self.is_file = stat.S_ISREG(st.st_mode)
        if self.is_file:
            # An emptied file reads as zeros: the image lands sparse, nothing stale remains.
            os.ftruncate(self.fd, 0)
            self.target_zeroed = True
        self.capacity = None if self.is_file else os.lseek(self.fd, 0, os.SEEK_END)
        os.lseek(self.fd, 0, os.SEEK_SET)
        self._buf = Block(BLOCK)

    def _open(self, path, flags, direct):
        self.direct = False
        if direct:
            try:
                fd = os.open(path, flags | os.O_DIRECT, 0o644)
                self.direct = True
                return fd
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise ImageError(f"cannot open {path} for writing: {exc.strerror}") from exc
                LOG.info("%s does not support O_DIRECT; writing through the page cache", path)
        try:
            return os.open(path, flags, 0o644)
        except OSError as exc:
            raise ImageError(f"cannot open {path} for writing: {exc.strerror}") from exc

    def write(self, data):
        """data: at most BLOCK bytes; every call but the last must be a multiple of ALIGN."""
        self._buf.view[:len(data)] = data
        self.write_block(self._buf.view, len(data))

    def write_block(self, block, n):
        """Write the first n bytes of block, a page-aligned buffer (a pipeline.BlockRing
        block), under the same rules as write()."""
        self.zero_bytes_skipped += self.write_at(block, n, self.reserve(n))

    def reserve(self, n):
        """The offset the next n bytes go to; after it, write_at() may run in another thread."""
        if self.capacity is not None and self.offset + n > self.capacity:
            raise ImageError(f"the image is larger than {self.path} ({self.capacity} bytes): "
                             f"it does not fit")
        offset, self.offset = self.offset, self.offset + n
        return offset

    def write_at(self, block, n, offset):
        """Write block[:n] at offset; returns the zero bytes skipped. Touches no state but the
        target, so writes of distinct reserved ranges may run at once (InFlight)."""
        with memoryview(block) as view:
            if self.target_zeroed:
                return self._write_skipping(view, n, offset)
            self._write_at(view, 0, n, offset)
        return 0

    def _write_skipping(self, view, n, offset):
        run_start, skipped = None, 0
        for pos in range(0, n, ZERO_GRAIN):
            if pos + ZERO_GRAIN <= n and view[pos:pos + ZERO_GRAIN].tobytes() == _ZERO:
                if run_start is not None:
                    self._write_at(view, run_start, pos, offset)
                    run_start = None
                skipped += ZERO_GRAIN
            elif run_start is None:
                run_start = pos
        if run_start is not None:
            self._write_at(view, run_start, n, offset)
        return skipped

    def _write_at(self, view, start, end, base):
        """view[start:end] to the target at base + start."""
        offset = base + start
        aligned = start + (end - start) // ALIGN * ALIGN
        try:
            if aligned > start:
                self._pwrite_all(view[start:aligned], offset)
            if aligned < end:
                self._tail(view[aligned:end], offset + aligned - start)
        except OSError as exc:
            raise ImageError(f"writing {self.path} at byte {offset} failed: {exc.strerror}") \
                from exc

    def _pwrite_all(self, view, offset):
        pwrite_all(self.fd, view, offset)

    def _tail(self, data, offset):
        # The unaligned end of the image cannot go through O_DIRECT; drop the flag for it.
        if self.direct:
            fl = fcntl.fcntl(self.fd, fcntl.F_GETFL)
            fcntl.fcntl(self.fd, fcntl.F_SETFL, fl & ~os.O_DIRECT)
            self.direct = False
        self._pwrite_all(data, offset)

    def finish(self):
        """Right size for a file target, then fsync: only a durable image counts as written."""
        try:
            if self.is_file:
                os.ftruncate(self.fd, self.offset)
            os.fsync(self.fd)
        except OSError as exc:
            raise ImageError(f"flushing {self.path} failed: {exc.strerror}") from exc

    def close(self):
        os.close(self.fd)
        self._buf.close()


class InFlight:
    """Keeps up to `depth` of a BlockWriter's writes going at once, each from its own block.
    One O_DIRECT write at a time leaves the disk idle while the next is issued: 1 GiB onto the
    benchmark's loop device took 0.71-0.87 s one write at a time and 0.57-0.62 s two at once.
    A block the size of which is not a multiple of ALIGN (the image's end) is written alone,
    after the others: its write changes the descriptor's flags."""

    def __init__(self, writer, depth=IN_FLIGHT):
        self.writer = writer
        self._depth = depth
        self._pool = ThreadPoolExecutor(max_workers=depth, thread_name_prefix="image-write")
        self._pending = collections.deque()     # (future, block, done)

    def submit(self, block, n, done=None):
        """Write block[:n] at the writer's next offset; done(block) is called in this thread
        once that write is over, so the block can be refilled."""
        if n % ALIGN:
            self.drain()
            self.writer.write_block(block, n)
            if done:
                done(block)
            return
        while len(self._pending) >= self._depth:
            self._reap()
        offset = self.writer.reserve(n)
        self._pending.append((self._pool.submit(self.writer.write_at, block, n, offset),
                              block, done))

    def _reap(self):
        future, block, done = self._pending.popleft()
        self.writer.zero_bytes_skipped += future.result()
        if done:
            done(block)

    def drain(self):
        """Wait for every write submitted; the first that failed raises here."""
        while self._pending:
            self._reap()

    def close(self):
        """Wait for the writes still running (after a failure, before the target is closed)."""
        self._pool.shutdown(wait=True)
