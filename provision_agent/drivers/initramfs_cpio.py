"""The file names in an image's initramfs, read from its cpio archives as data: nothing of the
image runs and nothing is unpacked.

An initramfs is one or more "newc" cpio archives, the early ones uncompressed (CPU microcode),
the last compressed (gzip, zstd, xz or bzip2 here; lz4 and lzo, rare, are "cannot tell"). The
file comes from the image, so it is untrusted: its size, the bytes decompressed, the entries
and the time are all bounded, and anything malformed is Unreadable, which callers take as
"cannot tell" (they rebuild the initramfs then, which is always correct, only slower).
Debian's lsinitramfs reads the same format, but copies the compressed part into a temporary
file (the ramdisk's memory), decompresses it twice and reads every early header a byte per
`dd`: tens of seconds under emulation, where this takes a few.
"""

import os
import re
import stat
import time

from provision_agent.drivers.images import decompressors
from provision_agent.errors import ImageError

MAX_FILE = 1 << 30          # an initramfs beyond this is no initramfs
MAX_BYTES = 2 << 30         # read and decompressed, file contents skipped included
MAX_ENTRIES = 1 << 18       # a large dracut initramfs with firmware has some 10 000
MAX_LISTING = 16 << 20      # bytes of names kept: a hostile archive cannot fill the ramdisk
MAX_NAME = 4096
DEADLINE_S = 120
MAGICS = (b"070701", b"070702")
HEADER = 110
HEX_FIELDS = re.compile(rb"[0-9A-Fa-f]{104}")
TRAILER = "TRAILER!!!"
CHUNK = 1 << 20


class Unreadable(Exception):
    """Not an initramfs this module can list; the message says why."""


class _Reader:
    """Exact reads, skips and a push-back over a file or a decompressor, within one budget of
    bytes and time shared by every layer of the file."""

    def __init__(self, src, budget):
        self._src, self._budget, self._back = src, budget, b""

    def read(self, n):
        if self._back:
            data, self._back = self._back[:n], self._back[n:]
            return data
        data = self._src.read(min(n, CHUNK))
        self._budget.spend(len(data))
        return data

    def readinto(self, view):
        data = self.read(len(view))
        view[:len(data)] = data
        return len(data)

    def exact(self, n, what):
        parts, got = [], 0
        while got < n:
            data = self.read(n - got)
            if not data:
                raise Unreadable(f"it ends inside {what}")
            parts.append(data)
            got += len(data)
        return b"".join(parts)

    def skip(self, n):
        while n > 0:
            n -= len(self.exact(min(n, CHUNK), "a file's contents"))

    def peek(self, n):
        data = b""
        while len(data) < n:
            more = self.read(n - len(data))
            if not more:
                break
            data += more
        self._back = data + self._back
        return data

    def skip_zeros(self):
        """The padding between archives (the kernel skips it the same way)."""
        while True:
            data = self.read(CHUNK)
            rest = data.lstrip(b"\0")
            if rest or not data:
                self._back = rest + self._back
                return

    def close(self):
        pass


class _Budget:
    def __init__(self, max_bytes, deadline_s):
        self.max_bytes, self.deadline_s = max_bytes, deadline_s
        self.left, self.deadline = max_bytes, time.monotonic() + deadline_s

    def spend(self, n):
        self.left -= n
        if self.left < 0:
            raise Unreadable(f"it holds more than {self.max_bytes >> 20} MiB")
        if time.monotonic() > self.deadline:
            raise Unreadable(f"reading it took more than {self.deadline_s} s")


class _Listing(list):
    """The names so far, within MAX_ENTRIES and MAX_LISTING bytes."""

    def __init__(self):
        super().__init__()
        self.entries = self.size = 0

    def add(self, name):
        self.entries += 1
        self.size += len(name)
        if self.entries > MAX_ENTRIES or self.size > MAX_LISTING:
            raise Unreadable(f"it lists more than {MAX_ENTRIES} entries or "
                             f"{MAX_LISTING >> 20} MiB of names")
        if name not in ("", "."):
            self.append(name)


def _archive(reader, names):
    """One archive's names, through its trailer, added to names (a _Listing)."""
    while True:
        header = reader.exact(HEADER, "a cpio header")
        if header[:6] not in MAGICS or not HEX_FIELDS.fullmatch(header[6:]):
            raise Unreadable("a cpio header is malformed")
        size, name_size = int(header[54:62], 16), int(header[94:102], 16)
        if not 0 < name_size <= MAX_NAME:
            raise Unreadable(f"a cpio name is {name_size} bytes long")
        name = reader.exact(name_size, "a cpio name").split(b"\0", 1)[0]
        reader.skip(-(HEADER + name_size) % 4)
        text = name.decode("utf-8", "surrogateescape")
        text = text[2:] if text.startswith("./") else text.lstrip("/")
        if text == TRAILER:
            return
        names.add(text)
        reader.skip(size + (-size % 4))


def _early(reader, names):
    """The uncompressed archives at the start, and the zeros that pad each."""
    while reader.peek(6) in MAGICS:
        _archive(reader, names)
        reader.skip_zeros()


def names(path, *, max_bytes=MAX_BYTES, deadline_s=DEADLINE_S):
    """Every file name in the initramfs at path (relative, as "usr/sbin/mdadm"), or
    Unreadable. path is not followed if it is a link."""
    try:
        # O_NONBLOCK: a FIFO in its place would block the open (regular files ignore it)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise Unreadable(f"it cannot be opened: {exc.strerror}") from None
    with os.fdopen(fd, "rb", buffering=0) as f:
        st = os.fstat(fd)
        if not (stat.S_ISREG(st.st_mode) and st.st_size <= MAX_FILE):
            raise Unreadable("it is not a regular file of an initramfs's size")
        budget = _Budget(max_bytes, deadline_s)
        raw = _Reader(f, budget)
        found = _Listing()
        _early(raw, found)
        head = raw.peek(8)
        if not head:
            return list(found)
        compression = decompressors.detect(head)
        if compression == "none":
            raise Unreadable("its main archive is compressed in a way this cannot read")
        # one archive in the compressed part (what mkinitramfs and dracut write); what may
        # follow its trailer (padding, another stream) is not read
        try:
            main = _Reader(decompressors.open_decompressor(compression, raw), budget)
            _archive(main, found)
        except ImageError as exc:
            raise Unreadable(str(exc)) from None
        return list(found)
