"""Images onto loop devices (root): a gzip ext4 image grown to its device, a zstd tar
extracted into a mounted ext4 with modes, owners, hard links and xattrs read back, zero runs
given to the device, an uncompressed image over HTTP read back as served."""

import functools
import gzip
import hashlib
import http.server
import os
import threading

import pytest
import zstandard

from provision_agent.drivers.images import formats, write_step, writer
from provision_agent.errors import ImageError
from provision_agent.run.runner import Runner
from tests.functional.prereq import require, sh

pytestmark = require("losetup", "mkfs.ext4", "e2fsck", "resize2fs", "dumpe2fs", "tar",
                     "fallocate")


def block_count(dev):
    for line in sh("dumpe2fs", "-h", dev).splitlines():
        if line.startswith("Block count:"):
            return int(line.split()[-1])
    raise AssertionError("no block count")


def test_gzip_ext4_grown_on_loop(tmp_path, loop):
    img = tmp_path / "fs.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    sh("mkfs.ext4", "-q", "-F", "-b", "4096", str(img))
    sh("debugfs", "-w", "-R", "mkdir marker", str(img))
    packed = tmp_path / "fs.img.gz"
    packed.write_bytes(gzip.compress(img.read_bytes(), 6))
    checksum = "sha256:" + hashlib.sha256(packed.read_bytes()).hexdigest()

    dev = loop(256 << 20)
    runner = Runner()
    assert formats.zero_device(runner, dev, "always")   # loop: rotational 1
    report = writer.write_to(str(packed), dev, fmt="raw", checksum=checksum,
                             target_zeroed=True, runner=runner)
    assert report.bytes_written == 64 << 20 and report.zero_bytes_skipped > 32 << 20
    assert block_count(dev) == (256 << 20) // 4096
    sh("e2fsck", "-fn", dev)
    assert "marker" in sh("debugfs", "-R", "ls /", dev)


def test_zstd_tar_into_mounted_ext4(tmp_path, loop):
    tree = tmp_path / "tree"
    (tree / "etc").mkdir(parents=True)
    secret = tree / "etc" / "shadow"
    secret.write_bytes(b"root:*:1:0:99999:7:::\n")
    os.chmod(secret, 0o640)
    os.chown(secret, 0, 42)
    tool = tree / "bin-tool"
    tool.write_bytes(b"#!/bin/sh\n")
    os.chown(tool, 1234, 5678)     # before chmod: chown clears the setuid bit
    os.chmod(tool, 0o4755)
    os.link(tool, tree / "hardlink")
    os.setxattr(tool, "user.provision", b"kept")
    os.symlink("etc/shadow", tree / "link")
    tar = tmp_path / "root.tar"
    sh("tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "--acls", "-cf", str(tar),
       "-C", str(tree), ".")
    packed = tmp_path / "root.tar.zst"
    packed.write_bytes(zstandard.ZstdCompressor(level=3).compress(tar.read_bytes()))

    dev = loop(128 << 20)
    sh("mkfs.ext4", "-q", "-F", dev)
    root = tmp_path / "target"
    (root / "srv").mkdir(parents=True)
    sh("mount", dev, str(root / "srv"))
    try:
        args = {"device": None, "mount_point": "/srv", "uri": str(packed), "format": "tar",
                "compression": "auto", "checksum": None, "checksum_of": "compressed",
                "allow_no_checksum": True, "fs_type": "ext4"}
        report = write_step.write_image(args, runner=Runner(), events=None,
                                    target_root=str(root))
        out = root / "srv"
        st = os.stat(out / "etc" / "shadow")
        assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o640, 0, 42)
        st = os.stat(out / "bin-tool")
        assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o4755, 1234, 5678)
        assert st.st_ino == os.stat(out / "hardlink").st_ino and st.st_nlink == 2
        assert os.getxattr(out / "bin-tool", "user.provision") == b"kept"
        assert os.readlink(out / "link") == "etc/shadow"
        assert report["bytes_written"] == tar.stat().st_size
    finally:
        sh("umount", str(root / "srv"))
    sh("e2fsck", "-fn", dev)


def test_zero_runs_are_zeroed_by_the_loop_device_and_read_back_as_zeros(tmp_path, loop):
    """A target full of old data, not zeroed first: the image's zero runs go to the device's
    write-zeroes (a loop device turns it into fallocate on its file) and read back as zeros,
    the data between them as written; with zero_policy never they are written as data."""
    data = os.urandom(1 << 20)
    image = bytes(3 << 20) + data + bytes(8 << 20) + data + b"end" * 100
    packed = tmp_path / "img.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(image))
    checksum = "sha256:" + hashlib.sha256(packed.read_bytes()).hexdigest()
    dev = loop(32 << 20)
    runner = Runner()
    # the first MiB, held back while the checksum is open (holdback.py), is written as data
    for policy, zeroed in (("auto", 10 << 20), ("never", 0)):
        with open(dev, "r+b") as f:
            f.write(b"\xa5" * (32 << 20))
        report = writer.write_to(str(packed), dev, fmt="raw", checksum=checksum, grow=False,
                                 runner=runner, zero_policy=policy)
        sh("blockdev", "--flushbufs", dev)
        with open(dev, "rb") as f:
            got = f.read(32 << 20)
        assert got[:len(image)] == image, policy
        assert got[len(image):] == b"\xa5" * ((32 << 20) - len(image)), policy
        assert report.zero_bytes_zeroed == zeroed and report.zero_bytes_skipped == 0, policy


def test_uncompressed_image_over_http_lands_on_the_loop_device_as_served(tmp_path, loop):
    """An uncompressed image read from the socket straight into the aligned blocks written
    with O_DIRECT: the device reads back as the image, the checksum is the image's, and a
    wrong checksum is an ImageError after the same download, and wipes what it wrote."""
    image = tmp_path / "disk.raw"
    data = os.urandom(3 << 20)
    image.write_bytes(data + bytes(6 << 20) + data + b"tail" * 1000)   # not a block multiple
    good = "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/disk.raw"
    dev = loop(32 << 20)
    runner = Runner()
    try:
        report = writer.write_to(url, dev, fmt="raw", checksum=good, grow=False, runner=runner)
        sh("blockdev", "--flushbufs", dev)
        with open(dev, "rb") as f:
            assert f.read(image.stat().st_size) == image.read_bytes()
        with pytest.raises(ImageError, match="checksum mismatch"):
            writer.write_to(url, dev, fmt="raw", checksum="sha256:" + "0" * 64, grow=False,
                            runner=runner)
    finally:
        server.shutdown()
        server.server_close()
    sh("blockdev", "--flushbufs", dev)
    with open(dev, "rb") as f:
        wiped = f.read(image.stat().st_size)
    # no filesystem or table to name more: the image's first and last MiB (holdback.py)
    assert wiped[:1 << 20] == wiped[-(1 << 20):] == bytes(1 << 20)
    assert report.checksum_actual == good and report.compression == "none"
    assert report.bytes_in == report.bytes_written == image.stat().st_size
