"""Write a stream of bytes to a block device or file: big aligned O_DIRECT writes, zero runs
left to the device.

O_DIRECT keeps a multi-GiB image from flushing the ramdisk's page cache and lets the disk see
large sequential writes; where the target refuses it (tmpfs, some loop setups) we fall back to
buffered writes. When the caller says the target is already zeroed, all-zero pieces are seeked
over. Otherwise, on a block device with write-zeroes support, they are given to the device
(BLKZEROOUT) instead of being written from memory, as qemu-img convert (ironic-python-agent's
path) does: the device zeroes them without the data crossing the bus, a thin or flash device
may leave them unallocated, and where the device has no cheap way the kernel writes them. The
image's free space is mostly zeros, often at its end, where nothing else overlaps the writes:
a 1 GiB zstd image took 1.07 s against 1.28 s written whole (2026-11-28, image_write.md). A
block's piece is copied to bytes and compared with a zero bytes object: a memcpy and a memcmp
(~20 GB/s measured here), where comparing the memoryview itself or any() is 40x slower; its
first page is compared first, so a piece of data costs a page, not a MiB.
"""

import collections
import errno
import fcntl
import logging
import os
import stat
import struct
from concurrent.futures import ThreadPoolExecutor

from provision_agent.drivers import blockinfo
from provision_agent.drivers.images.buffers import Block
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

BLOCK = 4 << 20         # one write; a multiple of every logical block size
ZERO_GRAIN = 1 << 20    # zero runs are detected and skipped at this granularity
_ZERO = bytes(ZERO_GRAIN)
ALIGN = 4096
_ZERO_PAGE = bytes(ALIGN)
IN_FLIGHT = 2           # writes at once (InFlight)
TICK = 1.0              # how often a wait for a write looks for the run's fault
BLKZEROOUT = 0x127F     # <linux/fs.h> _IO(0x12, 127): zero a byte range, reads back as zeros
_NO_ZEROOUT = (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOTTY)


def pwrite_all(fd, view, offset):
    """All of view at offset: pwrite may write less than asked (a signal, a device's limit)."""
    view = memoryview(view)
    while len(view):
        done = os.pwrite(fd, view, offset)
        if done <= 0:
            raise OSError(errno.ENOSPC, "short write")
        view, offset = view[done:], offset + done


def _is_zero(view, pos):
    return (view[pos:pos + ALIGN].tobytes() == _ZERO_PAGE
            and view[pos:pos + ZERO_GRAIN].tobytes() == _ZERO)


class BlockWriter:
    """zero_out: give the image's zero runs to the device's write-zeroes where it has it (a
    block device not known to be zeroed); False writes them as data."""

    def __init__(self, path, *, target_zeroed=False, direct=True, zero_out=True):
        self.path = path
        self.target_zeroed = target_zeroed
        self.offset = 0
        self.zero_bytes_skipped = 0
        self.zero_bytes_zeroed = 0      # given to the device's write-zeroes
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
        self.zero_out = (zero_out and not self.is_file and not self.target_zeroed
                         and (blockinfo.queue_value(path, "write_zeroes_max_bytes") or "0")
                         != "0")
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
        self.count_zeros(self.write_at(block, n, self.reserve(n)))

    def count_zeros(self, n):
        """n zero bytes a write_at() left out: seeked over, or zeroed by the device."""
        if self.target_zeroed:
            self.zero_bytes_skipped += n
        else:
            self.zero_bytes_zeroed += n

    def reserve(self, n):
        """The offset the next n bytes go to; after it, write_at() may run in another thread."""
        if self.capacity is not None and self.offset + n > self.capacity:
            raise ImageError(f"the image is larger than {self.path} ({self.capacity} bytes): "
                             f"it does not fit")
        offset, self.offset = self.offset, self.offset + n
        return offset

    def write_at(self, block, n, offset):
        """Write block[:n] at offset; returns the zero bytes left out (count_zeros). Touches
        no state but the target (and zero_out, once, if the device refuses it), so writes of
        distinct reserved ranges may run at once (InFlight)."""
        with memoryview(block) as view:
            if self.target_zeroed or self.zero_out:
                return self._write_runs(view, n, offset)
            self._write_at(view, 0, n, offset)
        return 0

    def _write_runs(self, view, n, offset):
        """The data runs of view[:n] written, its zero ZERO_GRAIN pieces seeked over (a zeroed
        target) or zeroed by the device, a run at a time; returns the zero bytes so left out."""
        data, zeros, left_out = None, None, 0
        for pos in range(0, n, ZERO_GRAIN):
            if pos + ZERO_GRAIN <= n and _is_zero(view, pos):
                if data is not None:
                    self._write_at(view, data, pos, offset)
                    data = None
                zeros = pos if zeros is None else zeros
            else:
                if zeros is not None:
                    left_out += self._zero_run(view, zeros, pos, offset)
                    zeros = None
                data = pos if data is None else data
        if zeros is not None:
            left_out += self._zero_run(view, zeros, n, offset)
        if data is not None:
            self._write_at(view, data, n, offset)
        return left_out

    def _zero_run(self, view, start, end, base):
        """view[start:end], all zeros, at base + start: nothing to do on a zeroed target, else
        the device's write-zeroes, else (it refused) written as data from now on."""
        if self.target_zeroed:
            return end - start
        if self.zero_out:
            try:
                fcntl.ioctl(self.fd, BLKZEROOUT, struct.pack("=QQ", base + start, end - start))
                return end - start
            except OSError as exc:
                if exc.errno not in _NO_ZEROOUT:
                    raise ImageError(f"zeroing {self.path} at byte {base + start} failed: "
                                     f"{exc.strerror}") from exc
                LOG.info("%s refused write-zeroes (%s): its zero runs are written as data",
                         self.path, exc.strerror)
                self.zero_out = False
        self._write_at(view, start, end, base)
        return 0

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

    def __init__(self, writer, depth=IN_FLIGHT, fault=None):
        self.writer = writer
        self._depth = depth
        # fault(): the run's fault or None (Runner.fault: a disk stopped answering,
        # run/disk_watch.py); a wait for a write raises it instead of waiting on
        self._fault = fault or (lambda: None)
        self._abandoned = False
        self._pool = ThreadPoolExecutor(max_workers=depth, thread_name_prefix="image-write")
        self._pending = collections.deque()     # (future, block, done)

    def submit(self, block, n, done=None):
        """Write block[:n] at the writer's next offset; done(block) is called in this thread
        once that write is over, so the block can be refilled."""
        self._raise_fault()     # a removed disk's writes may all succeed: look each block
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

    def _raise_fault(self):
        """The run's fault (the disk watch's), raised here: after device_del a removed virtio
        disk's buffered writes and their fsync were seen to succeed, so a writer that only
        looks while a write is slow would write the whole image into nothing."""
        fault = self._fault()
        if fault is not None:
            self._abandoned = True      # the writes in flight may never end: leave them
            raise fault

    def _reap(self):
        future, block, done = self._pending[0]
        while True:
            try:
                zeros = future.result(timeout=TICK)
                break
            except TimeoutError:
                fault = self._fault()
                if fault is not None:
                    self._abandoned = True      # its threads wait in the kernel: leave them
                    raise fault from None
        self._pending.popleft()
        self.writer.count_zeros(zeros)
        if done:
            done(block)

    def drain(self):
        """Wait for every write submitted; the first that failed raises here."""
        while self._pending:
            self._reap()
        self._raise_fault()

    def close(self):
        """Wait for the writes still running (after a failure, before the target is closed),
        unless the disk stopped answering: then they may never end."""
        self._pool.shutdown(wait=not self._abandoned, cancel_futures=self._abandoned)

    @property
    def abandoned(self):
        return self._abandoned
