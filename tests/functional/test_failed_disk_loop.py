"""Whole-disk images that fail (a bad signature, a wrong checksum, a stream cut midway) onto
loop devices (root), read back: no partition table anywhere (MBR, GPT primary, the GPT backup at
the image's end or at the device's end), and no filesystem superblock at any partition's start
the image's table named, although those partitions lie beyond the held-back first MiB. A raw
filesystem image or a tar that fails its checksum is taken back as a failed signature is."""

import gzip
import json
import os
import subprocess

import pytest

from provision_agent.drivers.images import write_step
from provision_agent.errors import EXIT_IMAGE_ERROR, ImageError
from provision_agent.run.runner import Runner
from tests import signing_keys as keys
from tests.functional.prereq import require, sh
from tests.functional.test_signed_loop import PARTITION_LINE, ext4_image, probe, read

pytestmark = [require("losetup", "mkfs.ext4", "debugfs", "sgdisk", "sfdisk", "blkid",
                      "mount", "tar")]
signing_keys = keys.signing_keys

MiB = 1 << 20
DEVICE = 64 * MiB
EXT4_MAGIC = b"\x53\xef"            # s_magic, 0x438 bytes into an ext2/3/4 filesystem
WRONG = "sha256:" + "0" * 64


def fs_at(dev, offset):
    """What blkid finds at offset of dev ('' for nothing)."""
    out = subprocess.run(["blkid", "-p", "-O", str(offset), "-o", "value", "-s", "TYPE", dev],
                         capture_output=True, text=True)
    return out.stdout.strip()


def ext4_bytes(tmp_path, size=16 * MiB):
    fs = tmp_path / "part.ext4"
    with open(fs, "wb") as f:
        f.truncate(size)
    sh("mkfs.ext4", "-q", "-F", str(fs))
    sh("debugfs", "-w", "-R", "mkdir marker", str(fs))
    return fs.read_bytes()


def disk_image(tmp_path, size, label="gpt", table_size=None):
    """(gzipped image, byte offsets of its ext4 partitions): a whole-disk image whose table
    was made for table_size bytes (its GPT backup header sits there), the file then padded to
    size, as an image grown without `sgdisk -e` is. gpt: partition 1 (1 MiB, 16 MiB) holds an
    ext4, partition 2 the rest. dos: primary 1 and logical 5 (in extended 2) hold one each."""
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(table_size or size)
    if label == "gpt":
        sh("sgdisk", "-n", "1:2048:+16M", "-t", "1:8300", "-n", "2:0:0", str(img))
    else:
        subprocess.run(["sfdisk", "-q", str(img)], check=True, text=True, capture_output=True,
                       input="label: dos\nstart=2048, size=32768, type=83\n"
                             "start=36864, type=5\nstart=38912, size=32768, type=83\n")
    table = json.loads(sh("sfdisk", "--json", str(img)))["partitiontable"]
    offsets = [p["start"] * 512 for p in table["partitions"] if p["size"] == 32768]
    with open(img, "r+b") as f:
        for offset in offsets:
            f.seek(offset)
            f.write(ext4_bytes(tmp_path))
        f.truncate(size)
    for offset in offsets:          # what a wipe must take: there before it
        assert fs_at(str(img), offset) == "ext4"
    packed = tmp_path / "disk.img.gz"
    packed.write_bytes(gzip.compress(img.read_bytes(), 1))
    return packed, offsets


def write(image, dev, zero="never", checksum=None, sig=None, keyring=None, fmt="disk"):
    args = {"uri": str(image), "device": dev, "format": fmt}
    if checksum:
        args["checksum"] = checksum
    else:
        args["allow_no_checksum"] = True
    options = {"image_zero_target": zero}
    if sig:
        args["signature"], options["image_keyring"] = sig, keyring
    return write_step.write_image(args, runner=Runner(), events=None, target_root="/nonexistent",
                              options=options)


def sha256(path):
    return "sha256:" + sh("sha256sum", str(path)).split()[0]


def assert_nothing_left(dev, offsets):
    """Neither the kernel, blkid nor gdisk finds a table; no superblock at any partition."""
    assert probe(dev) == ""
    whole = read(dev, 0, DEVICE)
    assert b"EFI PART" not in whole                 # no GPT header, primary or backup
    assert whole[510:512] != b"\x55\xaa"            # no MBR
    for offset in offsets:
        assert whole[offset + 0x438:offset + 0x43a] != EXT4_MAGIC, offset
        assert fs_at(dev, offset) == ""
    out = subprocess.run(["sgdisk", "-p", dev], capture_output=True, text=True).stdout
    assert "valid backup" not in out and not PARTITION_LINE.search(out)


# the image the size of the device (its backup at the device's end), and one made for 32 MiB
# then padded to 40 MiB (its backup mid-image, 8 MiB before the end of what was written)
SHAPES = [("gpt", DEVICE, None), ("gpt", 40 * MiB, 32 * MiB), ("dos", 48 * MiB, None)]


@keys.require()
@pytest.mark.parametrize("zero", ["never", "always"])
@pytest.mark.parametrize("label,size,table_size", SHAPES)
def test_a_failed_signature_leaves_no_partition_of_the_image(tmp_path, loop, signing_keys,
                                                             label, size, table_size, zero):
    image, offsets = disk_image(tmp_path, size, label, table_size)
    dev = loop(DEVICE)
    with pytest.raises(ImageError, match="does not verify") as caught:
        write(image, dev, zero, sha256(image), signing_keys.stranger_sign(image),
              signing_keys.keyring)
    assert caught.value.exit_code == EXIT_IMAGE_ERROR
    assert_nothing_left(dev, offsets)


@pytest.mark.parametrize("zero", ["never", "always"])
@pytest.mark.parametrize("label,size,table_size", SHAPES)
def test_a_wrong_checksum_leaves_no_partition_of_the_image(tmp_path, loop, label, size,
                                                           table_size, zero):
    image, offsets = disk_image(tmp_path, size, label, table_size)
    dev = loop(DEVICE)
    with pytest.raises(ImageError, match="checksum mismatch") as caught:
        write(image, dev, zero, WRONG)
    assert caught.value.exit_code == EXIT_IMAGE_ERROR
    assert_nothing_left(dev, offsets)


@pytest.mark.parametrize("signed", [pytest.param(True, marks=keys.require()), False])
def test_a_stream_cut_midway_leaves_no_partition_of_the_image(tmp_path, loop, request, signed):
    """The first 4 MiB block (the table, partition 1's superblock) is on the disk when the
    gzip stream ends early: the wipe still knows the table it held back."""
    image, offsets = disk_image(tmp_path, DEVICE)
    whole = image.read_bytes()
    image.write_bytes(whole[:len(whole) * 3 // 4])
    dev = loop(DEVICE)
    sig = {}
    if signed:
        signing = request.getfixturevalue("signing_keys")
        sig = {"sig": signing.sign(image), "keyring": signing.keyring}
    with pytest.raises(ImageError, match="gzip"):
        write(image, dev, "never", sha256(image), **sig)
    assert_nothing_left(dev, offsets)


@pytest.mark.parametrize("label,size,table_size", SHAPES)
def test_a_good_checksum_gives_the_partitions(tmp_path, loop, label, size, table_size):
    """The same images, verified: the table and the filesystems the failures must take."""
    image, offsets = disk_image(tmp_path, size, label, table_size)
    dev = loop(DEVICE)
    write(image, dev, "never", sha256(image))
    assert probe(dev) == label
    for offset in offsets:
        assert fs_at(dev, offset) == "ext4"


@pytest.mark.parametrize("zero", ["never", "always"])
def test_a_raw_image_with_a_wrong_checksum_leaves_nothing_to_mount(tmp_path, loop, zero):
    image = ext4_image(tmp_path, 32 * MiB, "none")
    dev = loop(DEVICE)
    sh("mkfs.ext4", "-q", "-F", dev)     # what an earlier system left
    with pytest.raises(ImageError, match="checksum mismatch"):
        write(image, dev, zero, WRONG, fmt="raw")
    assert probe(dev) == ""
    assert read(dev, 0, MiB) == bytes(MiB)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    assert subprocess.run(["mount", "-o", "ro", dev, str(mnt)],
                          capture_output=True).returncode != 0


def test_a_tar_with_a_wrong_checksum_is_taken_out_of_its_filesystem(tmp_path, loop):
    tree = tmp_path / "tree"
    (tree / "boot").mkdir(parents=True)
    (tree / "boot" / "vmlinuz-6.1").write_bytes(b"kernel")
    image = tmp_path / "root.tar"
    sh("tar", "-cf", str(image), "-C", str(tree), ".")
    dev = loop(DEVICE)
    sh("mkfs.ext4", "-q", "-F", dev)
    root = tmp_path / "target"
    (root / "srv").mkdir(parents=True)
    sh("mount", dev, str(root / "srv"))
    try:
        args = {"uri": str(image), "format": "tar", "mount_point": "/srv", "checksum": WRONG}
        with pytest.raises(ImageError, match="checksum mismatch"):
            write_step.write_image(args, runner=Runner(), events=None, target_root=str(root),
                               options={})
        assert sorted(os.listdir(root / "srv")) == ["lost+found"]
    finally:
        sh("umount", str(root / "srv"))
