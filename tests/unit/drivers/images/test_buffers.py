"""buffers.Block: where its memory sits, what the kernel was told about it, and its release."""

import ctypes
import os

import pytest

from provision_agent.drivers.images import buffers
from provision_agent.drivers.images.blockwrite import BLOCK


def address(view):
    return ctypes.addressof(ctypes.c_char.from_buffer(view))


def smaps_entry(addr):
    """The /proc/self/smaps lines of the mapping that holds addr."""
    with open("/proc/self/smaps") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            if lo <= addr < hi:
                end = next((j for j in range(i + 1, len(lines))
                            if lines[j].startswith("VmFlags:")), len(lines) - 1)
                return lines[i:end + 1]
    raise AssertionError(f"no mapping holds {addr:#x}")


def thp_configured():
    return os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled")


@pytest.mark.parametrize("size", [BLOCK, buffers.HUGE_PAGE, 1 << 20, 4096])
def test_a_block_is_aligned_private_and_advised_huge_when_big_enough(size):
    block = buffers.Block(size)
    try:
        assert len(block.view) == size and not block.view.readonly
        addr = address(block.view)
        assert addr % (buffers.HUGE_PAGE if size >= buffers.HUGE_PAGE else 4096) == 0
        entry = smaps_entry(addr)
        assert entry[0].split()[1] == "rw-p"     # private: huge pages are not for shmem
        flags = entry[-1].split()[1:]
        assert ("hg" in flags) == (size >= buffers.HUGE_PAGE and thp_configured())
        block.view[:5] = b"bytes"
        block.view[-3:] = b"end"
        assert bytes(block.view[:5]) == b"bytes" and bytes(block.view[-3:]) == b"end"
        assert bytes(block.view[5:-3]) == bytes(size - 8)
    finally:
        block.close()


def test_close_frees_the_block_and_tolerates_a_view_still_alive():
    block = buffers.Block(BLOCK)
    block.close()
    with pytest.raises(ValueError):
        block.view[0]
    held = buffers.Block(BLOCK)
    piece = held.view[:10]      # a writer thread's slice, alive while an error unwinds
    held.close()                # leaves the memory to the garbage collector
    piece[:3] = b"yes"
    assert bytes(piece[:3]) == b"yes"
