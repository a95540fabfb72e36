"""The exact command lines the storage drivers build from plan step arguments."""

import json

import pytest

from provision_agent.drivers import fstab, lvm, md, mkfs, partitions
from provision_agent.errors import ImageError, MachineMismatch
from provision_agent.plan.devnames import partition_number
from tests.unit.fakes import FakeRunner


def test_gpt_partition_argv_carries_geometry_type_name_guid_and_boot_flag():
    argv = partitions.gpt_argv({
        "disk": "/dev/vda", "number": 2, "offset": 2097152, "size": 268435456, "sector_size": 512,
        "type": "A19D880F-05FC-4D3B-A006-743F0F84911E", "name": "boot",
        "guid": "11111111-2222-3333-4444-555555555555", "flags": ["boot"]})
    assert argv == ["sgdisk", "--new=2:4096:528383",
                    "--typecode=2:A19D880F-05FC-4D3B-A006-743F0F84911E",
                    "--change-name=2:boot",
                    "--partition-guid=2:11111111-2222-3333-4444-555555555555",
                    "--attributes=2:set:2", "/dev/vda"]


def test_msdos_logical_partition_gets_type_byte_and_boot_flag():
    argvs = partitions.msdos_argvs({"disk": "/dev/sda", "number": 5, "offset": 3145728,
                                    "size": 104857600, "sector_size": 512,
                                    "type": "0x82", "kind": "logical",
                                    "flags": ["boot"]})
    assert argvs == [
        ["parted", "-s", "-a", "none", "/dev/sda", "unit", "s", "mkpart", "logical",
         "6144s", "210943s"],
        ["sfdisk", "--part-type", "/dev/sda", "5", "82"],
        ["parted", "-s", "/dev/sda", "set", "5", "boot", "on"]]


def test_msdos_extended_partition_has_no_type_change():
    argvs = partitions.msdos_argvs({"disk": "/dev/sda", "number": 4, "offset": 2097152,
                                    "size": 3022848, "sector_size": 512,
                                    "type": "0x0f", "kind": "extended",
                                    "flags": []})
    assert len(argvs) == 1 and argvs[0][-3:] == ["extended", "4096s", "9999s"]


def test_md_create_with_spares_chunk_and_metadata():
    argv = md.create_argv({"device": "/dev/md/data", "name": "data", "level": 5,
                           "members": ["/dev/vda2", "/dev/vdb2", "/dev/vdc2"],
                           "spares": ["/dev/vdd2"], "metadata": "1.2", "chunk_kib": 256})
    assert argv[:4] == ["mdadm", "--create", "/dev/md/data", "--run"]
    assert {"--level=5", "--raid-devices=3", "--metadata=1.2", "--name=data",
            "--spare-devices=1", "--chunk=256K"} <= set(argv)
    assert argv[-4:] == ["/dev/vda2", "/dev/vdb2", "/dev/vdc2", "/dev/vdd2"]


def test_md_raid1_ignores_chunk():
    argv = md.create_argv({"device": "/dev/md/boot", "name": "boot", "level": 1,
                           "members": ["/dev/vda1", "/dev/vdb1"], "spares": [],
                           "metadata": "1.0", "chunk_kib": 64})
    assert not any(a.startswith("--chunk") for a in argv)
    assert "--metadata=1.0" in argv


@pytest.mark.parametrize("args,expected", [
    ({"vg": "os", "name": "root", "size_bytes": 1 << 30, "extents": None, "stripes": None},
     ["--size", f"{1 << 30}b"]),
    ({"vg": "os", "name": "data", "size_bytes": None, "extents": "100%FREE", "stripes": 3},
     ["--extents", "100%FREE", "--stripes", "3"]),
])
def test_lv_create_sizes(args, expected):
    argv = lvm.lv_create_argv(args)
    assert argv[:5] == ["lvcreate", "--yes", "--wipesignatures", "y", "--zero"]
    assert argv[-1] == "os"
    assert " ".join(expected) in " ".join(argv)


@pytest.mark.parametrize("fs,label,expected", [
    ("ext4", "root", ["mkfs.ext4", "-F", "-q", "-L", "root", "-E", "x", "/dev/d"]),
    ("xfs", None, ["mkfs.xfs", "-f", "-E", "x", "/dev/d"]),
    ("vfat", "EFI", ["mkfs.vfat", "-n", "EFI", "-E", "x", "/dev/d"]),
    ("swap", "sw", ["mkswap", "-f", "-L", "sw", "-E", "x", "/dev/d"]),
    ("btrfs", "b", ["mkfs.btrfs", "-f", "-L", "b", "-E", "x", "/dev/d"]),
])
def test_mkfs_argv(fs, label, expected):
    assert mkfs.argv(fs, "/dev/d", label, ["-E", "x"]) == expected


@pytest.mark.parametrize("fs,label,expected", [
    # each writes without asking: no prompt can hang the run
    ("jfs", "j", ["mkfs.jfs", "-q", "-L", "j", "/dev/d"]),
    ("ntfs", "n", ["mkfs.ntfs", "-Q", "-F", "-L", "n", "/dev/d"]),
    ("reiserfs", "r", ["mkfs.reiserfs", "-f", "-f", "-q", "-l", "r", "/dev/d"]),
])
def test_mkfs_argv_of_the_other_filesystems(fs, label, expected):
    assert mkfs.argv(fs, "/dev/d", label) == expected


def test_mkfs_unknown_type():
    with pytest.raises(ValueError):
        mkfs.argv("zfs", "/dev/d")


def test_fstab_lines_by_uuid():
    text = fstab.render([("abcd", {"mount_point": "/", "fs_type": "ext4", "options": "defaults",
                                   "dump": 0, "pass": 1}),
                         ("ef01", {"mount_point": "none", "fs_type": "swap", "options": "sw",
                                   "dump": 0, "pass": 0})])
    lines = [line.split("\t") for line in text.splitlines() if not line.startswith("#")]
    assert lines == [["UUID=abcd", "/", "ext4", "defaults", "0", "1"],
                     ["UUID=ef01", "none", "swap", "sw", "0", "0"]]


@pytest.mark.parametrize("dev,n", [("/dev/sda1", 1), ("/dev/nvme0n1p12", 12), ("/dev/vdb5", 5)])
def test_partition_number(dev, n):
    assert partition_number(dev) == n


def test_check_kept_partition_position():
    table = {"partitions": [{"node": "/dev/vda3", "start": 2048, "size": 1000}]}
    ok = {"number": 3, "offset": 1048576, "size": 512000, "sector_size": 512}
    assert partitions.check_kept(table, ok) is None
    assert "bytes 1048576-1560575 (512-byte sectors 2048-3047)" in \
        partitions.check_kept(table, dict(ok, offset=2 * 1048576))
    assert "does not exist" in partitions.check_kept(table, dict(ok, number=4))
    assert "does not exist" in partitions.check_kept(None, ok)


def image_table(label, parts, lastlba=None, firstlba=34):
    table = {"label": label, "sectorsize": 512,
             "partitions": [{"node": f"/dev/vdc{n}", "start": s, "size": z, "type": t}
                            for n, s, z, t in parts]}
    if lastlba:
        table.update(firstlba=firstlba, lastlba=lastlba)
    return json.dumps({"partitiontable": table})


class TableAfterSgdisk(FakeRunner):
    """sfdisk --json answers `before` until sgdisk has written, then `after`."""

    def __init__(self, before, after):
        super().__init__({"sfdisk --json": before})
        self.after = after

    def run(self, argv, **kw):
        result = super().run(argv, **kw)
        if argv[0] == "sgdisk":
            self.answers["sfdisk --json"] = self.after
        return result


IMAGE_PART = (1, 2048, 65536, "0FC63DAF-8483-4772-8E79-3D69D8477DE4")


@pytest.mark.parametrize("firstlba", [34, 2048])
def test_append_at_end_of_a_gpt_image_moves_the_backup_header_in_the_same_call(firstlba):
    # made for a 1 GiB disk, on a 4 GiB one: its backup header and last usable LBA mid-disk
    disk_bytes = 4 << 30
    last = disk_bytes // 512 - firstlba     # where gdisk's -e puts the last usable sector
    start = (last + 1 - 131072) // 2048 * 2048
    runner = TableAfterSgdisk(
        image_table("gpt", [IMAGE_PART], lastlba=(1 << 30) // 512 - 34, firstlba=firstlba),
        image_table("gpt", [IMAGE_PART, (2, start, last - start + 1, "L")], lastlba=last,
                    firstlba=firstlba))
    number, table = partitions.append_at_end(runner, "/dev/vdc", 64 << 20, disk_bytes,
                                             "config-2")
    assert number == 2
    # one sgdisk (each that writes sleeps a second), ended where sgdisk ends the free space
    assert runner.writes() == [
        f"sgdisk -e --new=2:{start}:0 --typecode=2:0FC63DAF-8483-4772-8E79-3D69D8477DE4 "
        f"--change-name=2:config-2 /dev/vdc"]
    # what the kernel must show for partprobe to be skipped: the image's and the new one,
    # as read back
    assert table == {1: (2048, 65536), 2: (start, last - start + 1)}


def test_append_at_end_refuses_a_partition_sgdisk_put_elsewhere():
    disk_bytes = 4 << 30
    image = image_table("gpt", [IMAGE_PART], lastlba=(1 << 30) // 512 - 34)
    runner = TableAfterSgdisk(image, image_table("gpt", [IMAGE_PART, (2, 4096, 8192, "L")],
                                                 lastlba=disk_bytes // 512 - 34))
    with pytest.raises(ImageError, match="did not put partition 2 at sector"):
        partitions.append_at_end(runner, "/dev/vdc", 64 << 20, disk_bytes)


def test_append_at_end_of_an_msdos_image():
    runner = FakeRunner({"sfdisk --json": image_table("dos", [(1, 2048, 65536, "83")])})
    number, table = partitions.append_at_end(runner, "/dev/vdc", 64 << 20, 1 << 30)
    assert number == 2 and table == {1: (2048, 65536), 2: (1966080, 131072)}
    assert runner.writes()[0] == ("parted -s -a none /dev/vdc unit s mkpart primary "
                                  "1966080s 2097151s")


@pytest.mark.parametrize("table,message", [
    (image_table("gpt", [(1, 2048, 8388000, "x")], lastlba=8388574), "no room for a 64 MiB"),
    (image_table("dos", [(n, 2048 * n, 2048, "83") for n in (1, 2, 3, 4)]), "no primary slot"),
    (image_table("dos", [(1, 2048, 2048, "83"), (2, 4096, 4096, "5")]), "no primary slot"),
    ("", "brought no partition table"),
])
def test_append_at_end_refuses_what_does_not_fit(table, message):
    runner = FakeRunner({"sfdisk --json": table})
    with pytest.raises(ImageError, match=message):
        partitions.append_at_end(runner, "/dev/vdc", 64 << 20, 4 << 30)
    assert runner.writes() == []


def test_same_volume_id_only_for_a_fat_volume_id_not_already_chosen():
    assert mkfs.same_volume_id("ec01-A28D") == ["-i", "EC01A28D"]
    assert mkfs.same_volume_id("EC01-A28D", ["-i", "12345678"]) == []
    assert mkfs.same_volume_id("0b9f1c2e-5d7a-4c1e-9a63-3f1f6b0e2a11") == []
    assert mkfs.same_volume_id(None) == []


# The ESP (512 MiB at 1 MiB) in each sector size: the tools count in the disk's own.
ESP = {"disk": "/dev/vdz", "number": 1, "offset": 1 << 20, "size": 512 << 20, "type": "T",
       "kind": "primary", "flags": []}


@pytest.mark.parametrize("sector,first,last", [(512, 2048, 1050623), (4096, 256, 131327)])
def test_bytes_become_the_disks_own_sectors(sector, first, last):
    args = dict(ESP, sector_size=sector)
    assert partitions.sectors(args) == (first, last)
    assert partitions.gpt_argv(args)[1] == f"--new=1:{first}:{last}"
    assert f"start={first}, size={last - first + 1}" in partitions.msdos_script([
        dict(args, device="/dev/vdz1", type="0x83")])
    assert partitions.msdos_argvs(args)[0][-2:] == [f"{first}s", f"{last}s"]


@pytest.mark.parametrize("offset,size", [((1 << 20) + 512, 512 << 20), (1 << 20, 4095), (0, 0)])
def test_bytes_that_are_not_whole_sectors_are_refused(offset, size):
    with pytest.raises(MachineMismatch) as exc:
        partitions.sectors(dict(ESP, sector_size=4096, offset=offset, size=size))
    assert "is not in whole 4096-byte sectors" in str(exc.value)


def test_a_table_planned_for_other_sectors_than_the_disks_is_not_written(tmp_path):
    """The last guard after the preflight: the disk's logical block size from sysfs."""
    (tmp_path / "null" / "queue").mkdir(parents=True)
    (tmp_path / "null" / "queue" / "logical_block_size").write_text("4096\n")
    r = FakeRunner()
    with pytest.raises(MachineMismatch) as exc:
        partitions.check_sector_size("/dev/null", [dict(ESP, sector_size=512)],
                                     sys_block=str(tmp_path))
    assert "in 512-byte sectors, the disk's logical sectors are 4096 bytes" in str(exc.value)
    partitions.check_sector_size("/dev/null", [dict(ESP, sector_size=4096)],
                                 sys_block=str(tmp_path))
    assert partitions.logical_sector_size(str(tmp_path / "null" / "queue" /
                                              "logical_block_size")) == 512     # a file
    assert r.writes() == []


def test_a_kept_partition_is_compared_in_bytes_on_a_4kn_disk():
    table = {"sectorsize": 4096, "partitions": [{"node": "/dev/sda2", "start": 131328,
                                                 "size": 262144}]}
    kept = {"number": 2, "offset": 513 << 20, "size": 1 << 30, "sector_size": 4096}
    assert partitions.check_kept(table, kept) is None
    # the same sector numbers read as 512-byte sectors are other bytes: not the same place
    assert "(512-byte sectors 131328-393471)" in partitions.check_kept(
        dict(table, sectorsize=512), kept)
