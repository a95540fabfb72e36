"""The outside-the-VM image readers, checked on an image made on the host (no VM needed):
storage tests trust them to say what really landed on the disks."""

import subprocess

import pytest

from tests.vmbench import images
from tests.vmbench.vm import parse_size

MiB = 1 << 20


def test_partition_table_and_probe_read_back_a_host_made_image(tmp_path):
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 * MiB)
    subprocess.run(["sgdisk", "-n1:2048:+8M", "-t1:ef02", "-c1:bios",
                    "-n2:0:0", "-t2:8300", "-c2:root", str(img)], check=True, capture_output=True)
    table = images.partition_table(img)
    assert table["label"] == "gpt"
    root = table["partitions"][1]
    # mkfs straight into the partition's byte range of the image file
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "rootfs", "-E", f"offset={root['start'] * 512}",
                    str(img), f"{root['size'] * 512 // 1024}k"], check=True, capture_output=True)

    parts = images.probe_partitions(img)
    assert [p["name"] for p, _ in parts] == ["bios", "root"]
    assert parts[0][1] == {}
    assert parts[1][1]["TYPE"] == "ext4" and parts[1][1]["LABEL"] == "rootfs"
    assert "EF02" in images.sgdisk_print(img)


def test_partition_table_of_blank_image_is_none(tmp_path):
    img = tmp_path / "blank.img"
    with open(img, "wb") as f:
        f.truncate(MiB)
    assert images.partition_table(img) is None
    assert images.probe(img) == {}


@pytest.mark.parametrize("text,expected", [("4G", 4 << 30), ("512M", 512 << 20), ("1GiB", 1 << 30),
                                           (4096, 4096), ("10", 10)])
def test_parse_size(text, expected):
    assert parse_size(text) == expected
