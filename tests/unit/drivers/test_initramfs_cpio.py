import os

import pytest

from provision_agent.drivers import initramfs, initramfs_cpio
from provision_agent.drivers.initramfs_cpio import Unreadable
from tests.unit.drivers.initramfs_files import MICROCODE, TOOLS
from tests.unit.drivers.initramfs_files import initramfs as make


@pytest.mark.parametrize("compression", ["zstd", "gzip", "xz", "bzip2"])
def test_names_behind_early_microcode_in_each_compression(tmp_path, compression):
    path = make(tmp_path, TOOLS, compression, early=MICROCODE)
    names = initramfs_cpio.names(str(path))
    assert set(TOOLS) <= set(names)
    assert "kernel/x86/microcode/GenuineIntel.bin" in names
    assert "TRAILER!!!" not in names


def test_a_main_archive_alone(tmp_path):
    names = initramfs_cpio.names(str(make(tmp_path, TOOLS)))
    assert set(TOOLS) <= set(names) and "kernel/x86/microcode/GenuineIntel.bin" not in names


def test_lz4_is_unreadable_not_empty(tmp_path):
    with pytest.raises(Unreadable, match="compressed in a way"):
        initramfs_cpio.names(str(make(tmp_path, TOOLS, "lz4", early=MICROCODE)))


def test_a_link_is_not_followed(tmp_path):
    real = make(tmp_path, TOOLS)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(Unreadable, match="cannot be opened"):
        initramfs_cpio.names(str(tmp_path / "link"))


@pytest.mark.parametrize("cut", [50, 200, -100])
def test_truncated_is_unreadable(tmp_path, cut):
    path = make(tmp_path, TOOLS, "gzip", early=MICROCODE)
    data = path.read_bytes()
    path.write_bytes(data[:cut])
    with pytest.raises(Unreadable):
        initramfs_cpio.names(str(path))


@pytest.mark.parametrize("field,value", [(54, b"+000_0FF"), (94, b"FFFFFFFF"), (94, b"00000000"),
                                         (0, b"070707")])
def test_a_malformed_header_is_unreadable(tmp_path, field, value):
    # 070707 (old binary cpio) and 070701 alike start with 0707: the early part then ends and
    # what follows is no known compression
    path = make(tmp_path, TOOLS, early=MICROCODE)
    data = bytearray(path.read_bytes())
    data[field:field + len(value)] = value
    path.write_bytes(bytes(data))
    with pytest.raises(Unreadable):
        initramfs_cpio.names(str(path))


def test_bytes_are_bounded(tmp_path):
    path = make(tmp_path, {**TOOLS, "big": b"\0" * (4 << 20)})
    assert "big" in initramfs_cpio.names(str(path))
    with pytest.raises(Unreadable, match="more than 1 MiB"):
        initramfs_cpio.names(str(path), max_bytes=1 << 20)


@pytest.mark.parametrize("limit", ["MAX_ENTRIES", "MAX_LISTING"])
def test_entries_and_names_kept_are_bounded(tmp_path, monkeypatch, limit):
    many = {f"lib/firmware/f{i:04d}": b"x" for i in range(300)}
    path = make(tmp_path, {**TOOLS, **many}, early=MICROCODE)
    assert len(initramfs_cpio.names(str(path))) > 300
    monkeypatch.setattr(initramfs_cpio, limit, 200 if limit == "MAX_ENTRIES" else 4000)
    with pytest.raises(Unreadable, match="lists more than"):
        initramfs_cpio.names(str(path))


def test_time_is_bounded(tmp_path):
    with pytest.raises(Unreadable, match="took more than -1 s"):
        initramfs_cpio.names(str(make(tmp_path, TOOLS)), deadline_s=-1)


def test_not_a_regular_file(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(Unreadable, match="not a regular file"):
        initramfs_cpio.names(str(tmp_path / "fifo"))


@pytest.mark.parametrize("files,needs,missing", [
    (TOOLS, ["mdadm", "lvm"], []),
    ({"usr/sbin/mdadm": b"x"}, ["mdadm", "lvm"], ["lvm"]),
    ({"usr/bin/lvm": b"x", "sbin/mdadm": b"x"}, ["mdadm", "lvm"], []),
    # a hook script named like the tool is not the tool
    ({"scripts/local-block/mdadm": b"x", "etc/lvm": b"x"}, ["mdadm", "lvm"], ["lvm", "mdadm"]),
    ({}, [], [])])
def test_lacking(tmp_path, files, needs, missing):
    path = make(tmp_path, {"init": b"#!/bin/sh\n", **files})
    assert initramfs.lacking(str(tmp_path), [("6.1.0-9-amd64", path.name)], needs) == missing


def test_lacking_everything_when_one_cannot_be_read(tmp_path):
    good = make(tmp_path, TOOLS)
    (tmp_path / "initrd.img-broken").write_bytes(b"not an initramfs")
    kernels = [("6.1.0-9", good.name), ("6.1.0-10", "initrd.img-broken")]
    assert initramfs.lacking(str(tmp_path), kernels, ["mdadm", "lvm"]) == ["mdadm", "lvm"]
