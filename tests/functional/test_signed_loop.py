"""Signed images onto loop devices (root): a good signature gives a filesystem that mounts; a
bad one leaves a device on which neither blkid, the kernel nor gdisk finds anything of the
image or of what was there before, whichever way the wipe went (unmapping or zeroing ends).
A tar image whose signature fails is taken back out of its mounted filesystem."""

import gzip
import os
import re
import subprocess

import pytest

from provision_agent.drivers.images import holdback, write_step
from provision_agent.errors import EXIT_IMAGE_ERROR, ImageError
from provision_agent.run.runner import Runner
from tests import signing_keys as keys
from tests.functional.prereq import require, sh

pytestmark = [require("losetup", "mkfs.ext4", "debugfs", "sgdisk", "blkid", "mount", "tar"),
              keys.require()]
signing_keys = keys.signing_keys

SIZE = 64 << 20
PARTITION_LINE = re.compile(r"^\s+\d+\s+\d+\s+\d+\s", re.M)     # sgdisk -p's table rows


def probe(dev):
    """What blkid finds on dev, filesystem or partition table: '' for nothing."""
    out = subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", "-s", "PTTYPE", dev],
                         capture_output=True, text=True)
    return out.stdout.strip()


def read(dev, offset, size):
    with open(dev, "rb") as f:
        f.seek(offset)
        return f.read(size)


def ext4_image(tmp_path, size, compression="gzip"):
    """An ext4 image with a marker directory; uncompressed, it takes the path that receives
    the download into the written blocks and verifies them beside the writes."""
    img = tmp_path / "root.ext4"
    with open(img, "wb") as f:
        f.truncate(size)
    sh("mkfs.ext4", "-q", "-F", str(img))
    sh("debugfs", "-w", "-R", "mkdir marker", str(img))
    if compression == "none":
        return img
    packed = tmp_path / "root.ext4.gz"
    packed.write_bytes(gzip.compress(img.read_bytes(), 1))
    return packed


def gpt_disk_image(tmp_path, size):
    """A whole-disk image the size of the device: its backup GPT lands at the device's end."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(size)
    sh("sgdisk", "-n", "1:2048:+16M", "-t", "1:8300", "-n", "2:0:0", str(img))
    packed = tmp_path / "disk.img.gz"
    packed.write_bytes(gzip.compress(img.read_bytes(), 1))
    return packed


def write(image, dev, sig, keyring, zero="never"):
    args = {"uri": str(image), "device": dev, "format": "raw" if "ext4" in str(image)
            else "disk", "allow_no_checksum": True, "signature": sig}
    return write_step.write_image(args, runner=Runner(), events=None, target_root="/nonexistent",
                              options={"image_keyring": keyring, "image_zero_target": zero})


@pytest.mark.parametrize("compression", ["gzip", "none"])
def test_a_good_signature_gives_a_filesystem_that_mounts(tmp_path, loop, signing_keys,
                                                         compression):
    image = ext4_image(tmp_path, 32 << 20, compression)
    dev = loop(SIZE)
    result = write(image, dev, signing_keys.sign(image), signing_keys.keyring)
    assert result["signature"] == "verified"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    sh("mount", dev, str(mnt))
    try:
        assert (mnt / "marker").is_dir()
    finally:
        sh("umount", str(mnt))


@pytest.mark.parametrize("zero,compression", [("never", "gzip"), ("always", "gzip"),
                                              ("never", "none")])
def test_a_failed_ext4_image_leaves_nothing_to_mount(tmp_path, loop, signing_keys, zero,
                                                     compression):
    image = ext4_image(tmp_path, 32 << 20, compression)
    dev = loop(SIZE)
    sh("mkfs.ext4", "-q", "-F", dev)     # what an earlier system left
    assert probe(dev) == "ext4"
    with pytest.raises(ImageError) as caught:
        write(image, dev, signing_keys.stranger_sign(image), signing_keys.keyring, zero)
    assert caught.value.exit_code == EXIT_IMAGE_ERROR
    assert read(dev, 0, holdback.HOLD) == bytes(holdback.HOLD)
    assert read(dev, SIZE - holdback.HOLD, holdback.HOLD) == bytes(holdback.HOLD)
    assert probe(dev) == ""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    assert subprocess.run(["mount", "-o", "ro", dev, str(mnt)],
                          capture_output=True).returncode != 0


@pytest.mark.parametrize("zero", ["never", "always"])
def test_a_failed_disk_image_leaves_no_table_and_no_backup(tmp_path, loop, signing_keys,
                                                           zero):
    image = gpt_disk_image(tmp_path, SIZE)
    dev = loop(SIZE)
    with pytest.raises(ImageError, match="does not verify"):
        write(image, dev, signing_keys.stranger_sign(image), signing_keys.keyring, zero)
    assert probe(dev) == ""
    assert read(dev, 0, holdback.HOLD) == bytes(holdback.HOLD)
    # gdisk rebuilds a table from a backup header it finds at the end: there is none
    assert read(dev, SIZE - holdback.HOLD, holdback.HOLD) == bytes(holdback.HOLD)
    out = subprocess.run(["sgdisk", "-p", dev], capture_output=True, text=True).stdout
    assert "valid backup" not in out and not PARTITION_LINE.search(out)


def test_a_good_disk_image_shows_its_table(tmp_path, loop, signing_keys):
    image = gpt_disk_image(tmp_path, SIZE)
    dev = loop(SIZE)
    write(image, dev, signing_keys.sign(image), signing_keys.keyring)
    assert probe(dev) == "gpt"
    assert len(PARTITION_LINE.findall(sh("sgdisk", "-p", dev))) == 2


def test_a_failed_tar_image_is_taken_out_of_its_filesystem(tmp_path, loop, signing_keys):
    tree = tmp_path / "tree"
    (tree / "boot").mkdir(parents=True)
    (tree / "boot" / "vmlinuz-6.1").write_bytes(b"kernel")
    os.symlink("/etc/passwd", tree / "escape")      # removed, never followed
    image = tmp_path / "root.tar"
    sh("tar", "-cf", str(image), "-C", str(tree), ".")
    dev = loop(SIZE)
    sh("mkfs.ext4", "-q", "-F", dev)
    root = tmp_path / "target"
    (root / "srv").mkdir(parents=True)
    sh("mount", dev, str(root / "srv"))
    try:
        args = {"uri": str(image), "format": "tar", "mount_point": "/srv",
                "allow_no_checksum": True, "signature": signing_keys.stranger_sign(image)}
        with pytest.raises(ImageError, match="does not verify"):
            write_step.write_image(args, runner=Runner(), events=None, target_root=str(root),
                               options={"image_keyring": signing_keys.keyring})
        assert sorted(os.listdir(root / "srv")) == ["lost+found"]
        assert os.path.exists("/etc/passwd")
    finally:
        sh("umount", str(root / "srv"))
