"""Overlap the stages of an image write: each stage reads ahead in its own thread.

A bounded queue between stages lets the network, the decompressor and the disk run at once
(sockets, zlib, lzma, zstandard and hashlib release the GIL) while holding at most a few
buffers of memory. Errors raised in a stage thread are re-raised in the consumer.

The last hand-off, decompressed bytes to the disk, is a BlockRing: the decompressor fills a
few preallocated aligned blocks in place and the writer writes from them. Handing 4 MiB bytes
objects between threads instead cost gzip a quarter of its inflate time (a fresh allocation,
page faults and one more copy per block: 1.03 s against 0.81 s for 1 GiB, idle machine).
"""

import queue
import threading

from provision_agent.drivers.images.buffers import Block

_END = object()


class ReadAhead:
    def __init__(self, reader, chunk, depth=4, name="image-reader"):
        self._src = reader
        self._chunk = chunk
        self._q = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._buf = b""         # the chunk being consumed, from _pos on
        self._pos = 0
        self._eof = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self):
        try:
            while not self._stop.is_set():
                data = self._src.read(self._chunk)
                self._put(data if data else _END)
                if not data:
                    return
        except BaseException as exc:    # handed to the consumer, who raises it
            self._put(exc)

    def _put(self, item):
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.2)
                return
            except queue.Full:
                continue

    def _next(self):
        item = self._q.get()
        if item is _END:
            self._eof = True
            return b""
        if isinstance(item, BaseException):
            self._eof = True
            raise item
        return item

    def _current(self):
        """The unread part of the current chunk is non-empty, or the stream has ended."""
        while self._pos == len(self._buf) and not self._eof:
            self._buf, self._pos = self._next(), 0
        return self._pos < len(self._buf)

    def read(self, n):
        """Up to n bytes; a whole queued chunk, not a copy, when n is at least its size."""
        if not self._current():
            return b""
        start, self._pos = self._pos, min(self._pos + n, len(self._buf))
        if start == 0 and self._pos == len(self._buf):
            return self._buf
        return self._buf[start:self._pos]

    def readinto(self, view):
        """Fill view, short only at the end of the stream: the chunks are copied once, straight
        into the caller's buffer, with no joined or sliced bytes in between."""
        have = 0
        while have < len(view) and self._current():
            take = min(len(view) - have, len(self._buf) - self._pos)
            with memoryview(self._buf) as chunk:
                view[have:have + take] = chunk[self._pos:self._pos + take]
            self._pos += take
            have += take
        return have

    def read_full(self, n):
        """Exactly n bytes unless the stream ends first."""
        parts, have = [], 0
        while have < n:
            data = self.read(n - have)
            if not data:
                break
            parts.append(data)
            have += len(data)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def close(self):
        self._stop.set()
        self._thread.join(timeout=5)
        self._src.close()


def read_into(reader, view):
    """One readinto() on reader, or read() and a copy for a reader that has no readinto."""
    readinto = getattr(reader, "readinto", None)
    if readinto is not None:
        return readinto(view)
    data = reader.read(len(view))
    view[:len(data)] = data
    return len(data)


def fill(reader, view):
    """Fill view from reader, short only at the end of the stream; returns the bytes filled."""
    have = 0
    while have < len(view):
        k = read_into(reader, view[have:])
        if not k:
            break
        have += k
    return have


class BlockRing:
    """A stage thread fills `count` page-aligned blocks (buffers.Block) from reader (readinto
    where the reader has it: nothing allocated, nothing copied); the consumer takes each filled
    block, a memoryview, in order with next(), writes from it and gives it back with
    give_back(). A block filled short is the stream's last: the consumer must not ask for
    another after it.

    inspect(view, last), when given, sees each filled block's bytes in a thread of its own
    before the consumer gets the block (a checksum: hashing in the filling thread would make
    the download wait for it); last is True on the stream's last block."""

    def __init__(self, reader, size, count=8, name="image-decompress", inspect=None):
        self._src = reader
        self._free = queue.Queue()
        self._full = queue.Queue()
        self._stop = threading.Event()
        self._inspect = inspect
        self._filled = queue.Queue() if inspect else self._full
        self._blocks = [Block(size) for _ in range(count)]
        for block in self._blocks:
            self._free.put(block.view)
        self._threads = [threading.Thread(target=self._run, name=name, daemon=True)]
        if inspect:
            self._threads.append(threading.Thread(target=self._look, name=f"{name}-check",
                                                  daemon=True))
        for thread in self._threads:
            thread.start()

    def _run(self):
        try:
            while True:
                block = self._take(self._free)
                if block is None:
                    return
                n = fill(self._src, block)
                self._filled.put((block, n))
                if n < len(block):
                    return
        except BaseException as exc:    # handed to the consumer, who raises it
            self._filled.put((exc, 0))

    def _look(self):
        while True:
            item = self._take(self._filled)
            if item is None:
                return
            block, n = item
            if not isinstance(block, BaseException):
                try:
                    with block[:n] as part:
                        self._inspect(part, n < len(block))
                except BaseException as exc:
                    item = (exc, 0)
            self._full.put(item)
            if isinstance(item[0], BaseException) or n < len(block):
                return

    def _take(self, source):
        """The next item of source, or None once close() has been called."""
        while not self._stop.is_set():
            try:
                return source.get(timeout=0.2)
            except queue.Empty:
                continue
        return None

    def next(self):
        """(block, n): the next block (a memoryview) and how many of its bytes are the
        stream's."""
        block, n = self._full.get()
        if isinstance(block, BaseException):
            raise block
        return block, n

    def give_back(self, block):
        self._free.put(block)

    def close(self):
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        self._src.close()
        for block in self._blocks:
            block.close()


class Peek:
    """Look at the first bytes (compression magic) without consuming them."""

    def __init__(self, reader):
        self._src = reader
        self._head = b""

    def peek(self, n):
        while len(self._head) < n:
            data = self._src.read(n - len(self._head))
            if not data:
                break
            self._head += data
        return self._head[:n]

    def read(self, n):
        if self._head:
            data, self._head = self._head[:n], self._head[n:]
            return data
        return self._src.read(n)

    def readinto(self, view):
        if self._head:
            data = self.read(len(view))
            view[:len(data)] = data
            return len(data)
        return read_into(self._src, view)

    def close(self):
        self._src.close()


class Counting:
    """Counts bytes and reports them to a progress callback."""

    def __init__(self, reader, on_bytes=None):
        self._src = reader
        self.count = 0
        self._on_bytes = on_bytes

    def read(self, n):
        data = self._src.read(n)
        self._counted(len(data))
        return data

    def readinto(self, view):
        n = read_into(self._src, view)
        self._counted(n)
        return n

    def _counted(self, n):
        self.count += n
        if self._on_bytes:
            self._on_bytes(self.count)

    def close(self):
        self._src.close()
