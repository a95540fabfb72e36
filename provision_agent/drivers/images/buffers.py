"""The blocks an image is decompressed into and written from: page-aligned, as O_DIRECT requires,
and on transparent huge pages where the kernel has them.

A 4 MiB O_DIRECT write from 4 KiB pages is 1024 pages for the kernel to pin and, on a virtio
disk that takes 254 segments a request, up to five requests (pages that happen to lie side by
side merge into one segment); from two 2 MiB huge pages it is two segments and one request.
Private anonymous memory is needed for that: Python's default anonymous mmap is shared memory,
which huge pages skip unless the machine's shmem setting allows them. Kernels before 6.7 place
a mapping at any page; the block is cut out of one 2 MiB larger at a 2 MiB boundary, so that it
is all huge pages there too. Where the kernel has no huge pages (or they are off), the same
blocks are plain pages and everything works as before.
"""

import ctypes
import mmap

HUGE_PAGE = 2 << 20


class Block:
    """size bytes of page-aligned memory: view is a writable memoryview of them. close() frees
    them once every view taken of view is released."""

    def __init__(self, size):
        pad = HUGE_PAGE if size >= HUGE_PAGE else 0
        self._map = mmap.mmap(-1, size + pad, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        start = -_address(self._map) % HUGE_PAGE if pad else 0
        _advise_huge(self._map, start, size)
        self.view = memoryview(self._map)[start:start + size]

    def close(self):
        """Free the memory; a view of it still alive (an error unwinding) leaves that to GC."""
        try:
            self.view.release()
            self._map.close()
        except BufferError:
            pass


def _address(mapping):
    probe = ctypes.c_char.from_buffer(mapping)
    try:
        return ctypes.addressof(probe)
    finally:
        del probe   # the probe holds an export of the mapping until it goes


def _advise_huge(mapping, start, size):
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is None or size < HUGE_PAGE:
        return
    try:
        mapping.madvise(advice, start, size)
    except OSError:
        pass    # a kernel without transparent huge pages: plain pages serve as well
