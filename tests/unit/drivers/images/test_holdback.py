"""holdback: the held first MiB, and taking a failed image back (files here; loop devices in
tests/functional/test_signed_loop.py)."""

import mmap
import os

from provision_agent.drivers.images import holdback
from provision_agent.run.runner import Runner


def test_held_bytes_leave_zeros_in_the_block_and_go_out_on_release(tmp_path):
    block = mmap.mmap(-1, 4 << 20)
    data = os.urandom(4 << 20)
    block[:] = data
    held = holdback.Held(block, len(data))
    assert block[:holdback.HOLD] == bytes(holdback.HOLD)
    assert block[holdback.HOLD:] == data[holdback.HOLD:]
    target = tmp_path / "t.img"
    target.write_bytes(block[:])
    held.release(str(target))
    assert target.read_bytes() == data
    held.close()


def test_a_short_image_is_held_whole(tmp_path):
    block = mmap.mmap(-1, 4 << 20)
    block[:5000] = b"x" * 5000
    held = holdback.Held(block, 5000)
    assert held.size == 5000 and block[:5000] == bytes(5000)
    target = tmp_path / "t.img"
    target.write_bytes(bytes(5000))
    held.release(str(target))
    assert target.read_bytes() == b"x" * 5000


def test_wipe_empties_a_file_target(tmp_path):
    target = tmp_path / "t.img"
    target.write_bytes(b"y" * (3 << 20))
    holdback.wipe(Runner(), str(target), 3 << 20)
    assert target.read_bytes() == b""


def test_empty_removes_what_the_archive_put_there_and_follows_no_link(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("not the image's")
    top = tmp_path / "mnt"
    (top / "etc" / "deep" / "er").mkdir(parents=True)
    (top / "etc" / "deep" / "er" / "f").write_text("x")
    (top / "hostname").write_text("node")
    os.symlink(str(outside), top / "etc" / "dirlink")
    os.symlink(str(outside / "keep"), top / "filelink")
    os.symlink("/nonexistent", top / "dangling")
    os.mkfifo(top / "fifo")
    holdback.empty(str(top))
    assert os.listdir(top) == []
    assert (outside / "keep").read_text() == "not the image's"
