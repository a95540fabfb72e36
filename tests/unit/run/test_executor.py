"""The executor: dispatch in plan order, events, report, and unmount on failure."""

import io
import json
import threading

import pytest

from provision_agent.errors import CommandError, MachineMismatch
from provision_agent.plan.steps import make as Step
from provision_agent.plan.units import MiB
from provision_agent.run.events import Events
from provision_agent.run.executor import Executor
from tests.unit.drivers.test_storage_commands import TableAfterSgdisk
from tests.unit.fakes import FakeRunner

STEPS = [
    Step("mkfs", {"device": "/dev/vda2", "fs_type": "ext4", "label": "root", "options": []}),
    Step("mount", {"device": "/dev/vda2", "mount_point": "/", "fs_type": "ext4",
                   "options": "defaults"}),
    Step("mount", {"device": "/dev/vda1", "mount_point": "/boot", "fs_type": "ext2",
                   "options": "defaults"}),
    Step("fstab", {"entries": [{"device": "/dev/vda2", "mount_point": "/", "fs_type": "ext4",
                                "options": "defaults", "dump": 0, "pass": 1}]}),
    Step("umount", {"mount_points": ["/boot", "/"]}),
]


def run(tmp_path, steps, fail=()):
    stream = io.StringIO()
    r = FakeRunner({"blkid": "1234-uuid\n"}, fail=fail)
    ex = Executor(r, Events([stream]), str(tmp_path))
    try:
        report = ex.execute(steps)
    except CommandError:
        report = None
    events = [json.loads(line) for line in stream.getvalue().splitlines()]
    return r, report, events


def test_runs_in_order_writes_fstab_and_reports(tmp_path):
    r, report, events = run(tmp_path, STEPS)
    writes = r.writes()
    assert writes[0] == "mkfs.ext4 -F -q -L root /dev/vda2"
    assert writes[1:3] == [f"mount -t ext4 /dev/vda2 {tmp_path}",
                           f"mount -t ext2 /dev/vda1 {tmp_path}/boot"]
    assert writes[-2:] == [f"umount {tmp_path}/boot", f"umount {tmp_path}"]
    fstab = (tmp_path / "etc" / "fstab").read_text()
    assert "UUID=1234-uuid\t/\text4\tdefaults\t0\t1" in fstab
    assert report["filesystems"] == [{"device": "/dev/vda2", "fs_type": "ext4",
                                      "label": "root", "uuid": "1234-uuid"}]
    assert [s["kind"] for s in report["steps"]] == [s.kind for s in STEPS]
    assert [(e["index"], e["status"]) for e in events][:2] == [(1, "start"), (1, "done")]
    assert events[-1]["status"] == "done" and events[-1]["count"] == len(STEPS)


def test_failure_unmounts_what_was_mounted_and_reports_the_step(tmp_path):
    steps = STEPS[:3] + [Step("mkfs", {"device": "/dev/vdb", "fs_type": "xfs", "label": None,
                                       "options": []})]
    r, report, events = run(tmp_path, steps, fail=("mkfs.xfs",))
    assert report is None
    assert r.lines()[-2:] == [f"umount {tmp_path}/boot", f"umount {tmp_path}"]
    failed = [e for e in events if e["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["kind"] == "mkfs" and failed[0]["index"] == 4
    assert "simulated failure" in failed[0]["error"]


def test_partition_table_keeps_partitions_named_keep(tmp_path):
    table = {"partitiontable": {"partitions": [{"node": f"/dev/vda{n}", "start": 2048 * n,
                                                "size": 2048} for n in (1, 2, 3)]}}
    steps = [Step("partition_table", {"disk": "/dev/vda", "label": "gpt"}),
             Step("partition", {"disk": "/dev/vda", "number": 2, "device": "/dev/vda2",
                                "offset": 2097152, "size": 1048576, "sector_size": 512,
                                "type": "X", "keep": True}),
             Step("partition", {"disk": "/dev/vda", "number": 3, "device": "/dev/vda3",
                                "offset": 3145728, "size": 1048576, "sector_size": 512,
                                "type": "X", "name": None,
                                "flags": [], "guid": None, "kind": None, "keep": False})]
    r = FakeRunner({"sfdisk --json": json.dumps(table)})
    Executor(r, Events(), str(tmp_path)).execute(steps)
    # one sgdisk call: the others deleted, the new one made, partition 2 never named
    assert r.writes() == ["sgdisk --delete=3 --delete=1 --new=3:6144:8191 --typecode=3:X "
                          "/dev/vda"]


def test_a_gpt_disk_is_written_in_one_sgdisk_call_after_a_wipe_without_zap(tmp_path,
                                                                           monkeypatch):
    from provision_agent.drivers import wipe
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    part = {"disk": "/dev/vda", "type": "T", "name": None, "flags": [], "guid": None,
            "kind": None, "keep": False}
    steps = [Step("wipe", {"disk": "/dev/vda", "keep": []}),
             Step("partition_table", {"disk": "/dev/vda", "label": "gpt"}),
             Step("partition", dict(part, number=1, device="/dev/vda1",
                                    offset=1048576, size=1048576, sector_size=512,
                                    flags=["boot"])),
             Step("partition", dict(part, number=2, device="/dev/vda2",
                                    offset=2097152, size=2097152, sector_size=512,
                                    name="root"))]
    stream = io.StringIO()
    r = FakeRunner({"lsblk --json": json.dumps({"blockdevices": [
        {"name": "vda", "path": "/dev/vda", "type": "disk", "fstype": None}]})})
    report = Executor(r, Events([stream]), str(tmp_path)).execute(steps)
    # the new table's own write makes the kernel re-read it: no --zap-all and its sleep
    assert r.writes() == [
        "wipefs --all --force /dev/vda",
        "sgdisk --clear --new=1:2048:4095 --typecode=1:T --attributes=1:set:2 "
        "--new=2:4096:8191 --typecode=2:T --change-name=2:root /dev/vda"]
    assert [s["result"] for s in report["steps"][1:]] == [
        {"partitions": ["/dev/vda1", "/dev/vda2"]},
        {"written_with_table": True}, {"written_with_table": True}]
    done = [e["index"] for e in map(json.loads, stream.getvalue().splitlines())
            if e["status"] == "done"]
    assert done == [1, 2, 3, 4]


TWO_TABLES = [Step("partition_table", {"disk": "/dev/vda", "label": "gpt"}),
              Step("partition_table", {"disk": "/dev/vdb", "label": "gpt"}),
              *[Step("partition", {"disk": d, "number": 1, "device": f"{d}1", "offset": start,
                                   "size": 4 * MiB - start, "sector_size": 512, "type": "T",
                                   "name": None, "flags": [], "guid": None, "kind": None,
                                   "keep": False})
                for d, start in (("/dev/vda", MiB), ("/dev/vdb", 2 * MiB))]]


class MeetingRunner(FakeRunner):
    """sgdisk returns only once both disks' sgdisk are running: one after the other, the first
    would wait out the barrier's timeout and fail."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.barrier = threading.Barrier(2, timeout=30)

    def run(self, argv, **kw):
        if argv[0] == "sgdisk":
            self.barrier.wait()
        return super().run(argv, **kw)


def test_the_tables_of_several_disks_are_written_at_once_and_reported_in_plan_order(tmp_path):
    stream = io.StringIO()
    r = MeetingRunner()
    report = Executor(r, Events([stream]), str(tmp_path)).execute(TWO_TABLES)
    assert sorted(r.writes()) == [
        "sgdisk --clear --new=1:2048:8191 --typecode=1:T /dev/vda",
        "sgdisk --clear --new=1:4096:8191 --typecode=1:T /dev/vdb"]
    events = [(e["index"], e["status"]) for e in map(json.loads, stream.getvalue().splitlines())]
    assert events[:4] == [(1, "start"), (2, "start"), (1, "done"), (2, "done")]
    assert [(s["index"], s["result"]) for s in report["steps"]] == [
        (1, {"partitions": ["/dev/vda1"]}), (2, {"partitions": ["/dev/vdb1"]}),
        (3, {"written_with_table": True}), (4, {"written_with_table": True})]


def test_a_failed_table_is_raised_once_the_other_disks_table_is_written(tmp_path):
    stream = io.StringIO()
    r = FakeRunner(fail=("sgdisk --clear --new=1:4096",))
    with pytest.raises(CommandError):
        Executor(r, Events([stream]), str(tmp_path)).execute(TWO_TABLES)
    assert len(r.writes()) == 2         # vda's table was written, vdb's failed, nothing after
    events = [(e["index"], e["status"]) for e in map(json.loads, stream.getvalue().splitlines())]
    assert events == [(1, "start"), (2, "start"), (1, "done"), (2, "failed")]


def test_the_same_disk_twice_is_never_written_at_once(tmp_path):
    from provision_agent.run.executor import _tables_at
    steps = [Step("partition_table", {"disk": "/dev/vda", "label": "gpt"}),
             Step("partition_table", {"disk": "/dev/vdb", "label": "gpt"}),
             Step("partition_table", {"disk": "/dev/vda", "label": "msdos"})]
    assert _tables_at(steps, 0) == steps[:2] and _tables_at(steps, 2) == steps[2:]
    assert _tables_at(STEPS, 0) == STEPS[:1]


def test_an_msdos_disk_is_written_in_one_sfdisk_call_numbered_as_planned(tmp_path):
    part = {"disk": "/dev/vda", "name": None, "flags": [], "guid": None, "keep": False}
    steps = [Step("partition_table", {"disk": "/dev/vda", "label": "msdos"}),
             Step("partition", dict(part, number=1, device="/dev/vda1",
                                    offset=1048576, size=1048576, sector_size=512,
                                    type="0x83", kind="primary", flags=["boot"])),
             Step("partition", dict(part, number=4, device="/dev/vda4", offset=2097152,
                                    size=8388608, sector_size=512, type="0x0f", kind="extended")),
             Step("partition", dict(part, number=5, device="/dev/vda5", offset=3145728,
                                    size=7340032, sector_size=512, type="0x8e", kind="logical"))]
    r = FakeRunner()
    Executor(r, Events(), str(tmp_path)).execute(steps)
    assert r.writes() == ["sfdisk --quiet /dev/vda"]
    assert r.inputs[0].splitlines() == [
        "label: dos", "unit: sectors", "",
        "/dev/vda1 : start=2048, size=2048, type=83, bootable",
        "/dev/vda4 : start=4096, size=16384, type=0f",
        "/dev/vda5 : start=6144, size=14336, type=8e"]


def test_an_msdos_table_around_kept_partitions_is_edited_a_partition_at_a_time(tmp_path):
    table = {"partitiontable": {"partitions": [{"node": f"/dev/vda{n}", "start": 2048 * n,
                                                "size": 2048} for n in (1, 2)]}}
    steps = [Step("partition_table", {"disk": "/dev/vda", "label": "msdos"}),
             Step("partition", {"disk": "/dev/vda", "number": 1, "device": "/dev/vda1",
                                "offset": 1048576, "size": 1048576, "sector_size": 512,
                                "type": "0x83", "keep": True}),
             Step("partition", {"disk": "/dev/vda", "number": 2, "device": "/dev/vda2",
                                "offset": 2097152, "size": 2097152, "sector_size": 512,
                                "type": "0x83", "name": None,
                                "flags": [], "guid": None, "kind": "primary", "keep": False})]
    r = FakeRunner({"sfdisk --json": json.dumps(table)})
    Executor(r, Events(), str(tmp_path)).execute(steps)
    assert r.writes() == ["parted -s /dev/vda rm 2",
                          "parted -s -a none /dev/vda unit s mkpart primary 4096s 8191s",
                          "sfdisk --part-type /dev/vda 2 83"]


def test_write_image_is_handed_the_step_and_its_report_kept(tmp_path, monkeypatch):
    from provision_agent.drivers.images import write_step
    seen = {}

    def fake(args, **kw):
        seen.update(args=args, **kw)
        return {"bytes_written": 42}

    monkeypatch.setattr(write_step, "write_image", fake)
    ex = Executor(FakeRunner(), Events(), str(tmp_path), options={"image_insecure": False})
    report = ex.execute([Step("write_image", {"device": "/dev/vda1", "mount_point": None,
                                              "uri": "file:///x", "format": "raw"})])
    assert seen["args"]["uri"] == "file:///x" and seen["target_root"] == str(tmp_path)
    assert seen["options"] == {"image_insecure": False}
    assert report["steps"][0]["result"] == {"bytes_written": 42}


def test_a_new_filesystem_adopts_what_the_parent_image_put_at_its_mount_point(tmp_path):
    # a raw root image brought /boot/vmlinuz; /boot is a new filesystem that would hide it
    (tmp_path / "boot").mkdir()
    (tmp_path / "boot" / "vmlinuz").write_text("kernel")
    steps = [Step("mkfs", {"device": "/dev/md/boot", "fs_type": "ext2", "label": None,
                           "options": []}),
             Step("mount", {"device": "/dev/os/root", "mount_point": "/", "fs_type": "ext4"}),
             Step("mount", {"device": "/dev/md/boot", "mount_point": "/boot",
                            "fs_type": "ext2"}),
             Step("mount", {"device": "/dev/os/srv", "mount_point": "/srv", "fs_type": "xfs"})]
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "from-image").write_text("x")    # /srv is not new: nothing copied
    r, report, _ = run(tmp_path, steps)
    writes = r.writes()
    staging = writes[2].split()[-1]
    assert writes[2:6] == [f"mount -t ext2 /dev/md/boot {staging}",
                           f"umount {staging}",
                           f"mount -t ext2 /dev/md/boot {tmp_path}/boot",
                           f"mount -t xfs /dev/os/srv {tmp_path}/srv"]
    assert f"cp -a --one-file-system {tmp_path}/boot/. {staging}" in r.lines()
    assert sum(line.startswith("cp ") for line in r.lines()) == 1


def test_an_esp_copy_gets_the_primary_esps_volume_id(tmp_path):
    r = FakeRunner({"blkid -p -s UUID -o value /dev/vda1": "EC01-a28d\n"})
    ex = Executor(r, Events([]), str(tmp_path))
    ex.execute([Step("mkfs", {"device": "/dev/vda1", "fs_type": "vfat", "label": "EFI",
                              "options": []}),
                Step("mkfs", {"device": "/dev/vdb1", "fs_type": "vfat", "label": "EFI",
                              "options": ["-F", "32"], "volume_id_of": "/dev/vda1"})])
    assert r.writes() == ["mkfs.vfat -n EFI /dev/vda1",
                          "mkfs.vfat -n EFI -F 32 -i EC01A28D /dev/vdb1"]


def test_a_kept_volume_group_is_activated_after_a_last_check(tmp_path):
    step = Step("vg_activate", {"name": "data", "pvs": ["/dev/vda4"], "lvs": ["srv"],
                                "devices": [str(tmp_path)]})
    pvs = json.dumps({"report": [{"pv": [{"pv_name": "/dev/vda4", "vg_name": "data"}]}]})
    lvs = json.dumps({"report": [{"lv": [{"lv_name": "srv"}]}]})
    r = FakeRunner({"pvs --reportformat": pvs, "lvs --reportformat": lvs})
    ex = Executor(r, Events([io.StringIO()]), str(tmp_path))
    ex.execute([step])
    assert r.writes() == ["vgchange --activate y data"]
    assert str(tmp_path) in ex.kept

    r = FakeRunner({"pvs --reportformat": pvs, "lvs --reportformat": json.dumps({})})
    ex = Executor(r, Events([io.StringIO()]), str(tmp_path))
    with pytest.raises(MachineMismatch, match="has no logical volume srv"):
        ex.execute([step])
    assert r.writes() == []


@pytest.mark.parametrize("kernel_has_it", [True, False])
def test_a_configdrive_behind_a_whole_disk_image_rereads_only_when_the_kernel_lacks_it(
        tmp_path, monkeypatch, kernel_has_it):
    from provision_agent.drivers import blockinfo, configdrive, udev
    disk_bytes = 4 << 30
    last = disk_bytes // 512 - 34
    start = (last + 1 - 131072) // 2048 * 2048
    image = {"node": "/dev/vda1", "start": 2048, "size": 65536, "type": "T"}
    before, after = ({"partitiontable": {"label": "gpt", "sectorsize": 512, "firstlba": 34,
                                         "lastlba": end, "partitions": parts}}
                     for end, parts in (((1 << 30) // 512 - 34, [image]),
                                        (last, [image, {"node": "/dev/vda2", "start": start,
                                                        "size": last - start + 1}])))
    shown = {1: (2048, 65536)}
    if kernel_has_it:       # sgdisk's own re-read of the table it wrote got through
        shown[2] = (start, last - start + 1)
    monkeypatch.setattr(blockinfo, "size_bytes", lambda disk: disk_bytes)
    monkeypatch.setattr(udev, "kernel_partitions", lambda disk, sys_block=None: shown)
    monkeypatch.setattr(udev, "wait_for_devices", lambda runner, devices: None)
    monkeypatch.setattr(configdrive, "write", lambda runner, args, options=None: 4096)
    r = TableAfterSgdisk(json.dumps(before), json.dumps(after))
    step = Step("configdrive", {"device": None, "format": "config-2", "append_to": "/dev/vda",
                                "size_bytes": 64 << 20, "partitions_of": "/dev/vda"})
    report = Executor(r, Events([io.StringIO()]), str(tmp_path)).execute([step])
    assert report["steps"][0]["result"] == {"device": "/dev/vda2", "bytes": 4096}
    assert ("partprobe /dev/vda" in r.lines()) is not kernel_has_it


@pytest.mark.parametrize("fmt,reread_after", [("qcow2", ["blockdev --rereadpt /dev/vda"]),
                                               ("disk", [])])
def test_a_disk_a_whole_disk_image_follows_is_wiped_without_zap(tmp_path, monkeypatch, fmt,
                                                                 reread_after):
    # sgdisk --zap-all only makes the kernel forget the old table, after a second's sleep;
    # the image brings the new one, re-read after it (the writer does so for disk images)
    from provision_agent.drivers import wipe
    from provision_agent.drivers.images import write_step
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    seen = {}
    monkeypatch.setattr(write_step, "write_image", lambda args, **kw: seen.update(kw) or {})
    r = FakeRunner({"lsblk --json": json.dumps({"blockdevices": [
        {"name": "vda", "path": "/dev/vda", "type": "disk", "fstype": None}]})})
    steps = [Step("wipe", {"disk": "/dev/vda", "keep": []}),
             Step("write_image", {"device": "/dev/vda", "mount_point": None,
                                  "uri": "http://x/disk.img", "format": fmt})]
    Executor(r, Events(), str(tmp_path)).execute(steps)
    assert [w for w in r.writes() if "--zap-all" in w] == []
    assert [line for line in r.lines() if "rereadpt" in line] == reread_after
    assert seen["table_follows"] is False


@pytest.mark.parametrize("fmt", ["qcow2", "disk"])
def test_a_whole_disk_image_a_configdrive_partition_follows_leaves_its_table_to_it(
        tmp_path, monkeypatch, fmt):
    # the configdrive's one sgdisk call moves the GPT's backup header and re-reads the table:
    # the writer does neither, nor does the executor re-read after a qcow2
    from provision_agent.drivers import configdrive, wipe
    from provision_agent.drivers.images import write_step
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    seen = {}
    monkeypatch.setattr(write_step, "write_image", lambda args, **kw: seen.update(kw) or {})
    monkeypatch.setattr(configdrive, "write", lambda runner, args, options=None: 1)
    r = FakeRunner({"lsblk --json": json.dumps({"blockdevices": [
        {"name": "vda", "path": "/dev/vda", "type": "disk", "fstype": None}]})})
    steps = [Step("wipe", {"disk": "/dev/vda", "keep": []}),
             Step("write_image", {"device": "/dev/vda", "mount_point": None,
                                  "uri": "http://x/disk.img", "format": fmt}),
             Step("configdrive", {"device": None, "format": "config-2", "append_to": "/dev/vda",
                                  "size_bytes": 64 << 20, "partitions_of": "/dev/vda"})]
    ex = Executor(r, Events(), str(tmp_path))
    ex._look_ahead(steps)
    ex.do_wipe(steps[0])
    ex.handlers["write_image"](steps[1])
    assert seen["table_follows"] is True
    assert [line for line in r.lines() if "rereadpt" in line or "zap" in line] == []


def test_the_table_a_4kn_disk_should_show_is_in_sysfs_units(tmp_path):
    """sysfs gives a partition's start and size in 512-byte units at any sector size: the
    planned table compared with it (to skip partprobe) is converted from the plan's bytes."""
    steps = [Step("partition_table", {"disk": "/dev/vdz", "label": "gpt"}),
             Step("partition", {"disk": "/dev/vdz", "number": 1, "device": "/dev/vdz1",
                                "offset": MiB, "size": 512 * MiB, "sector_size": 4096,
                                "type": "T", "name": None, "flags": [], "guid": None,
                                "kind": None, "keep": False})]
    r = FakeRunner()
    ex = Executor(r, Events(), str(tmp_path))
    ex.execute(steps)
    assert ex.tables == {"/dev/vdz": {1: (2048, 1048576)}}
    assert r.writes() == ["sgdisk --clear --new=1:256:131327 --typecode=1:T /dev/vdz"]


def test_a_kept_esp_gets_the_images_boot_files_and_a_kept_data_filesystem_nothing(tmp_path):
    """A kept ESP (or /boot) is the new system's: what the root image put at /boot/efi goes
    into it before it is mounted over, as for a new one, or grub's files would stay hidden.
    A kept data filesystem gets nothing of the image."""
    (tmp_path / "boot" / "efi" / "EFI").mkdir(parents=True)
    (tmp_path / "boot" / "efi" / "EFI" / "shim.efi").write_text("loader")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "from-image").write_text("x")
    steps = [Step("mount", {"device": "/dev/vda2", "mount_point": "/", "fs_type": "ext4"}),
             Step("mount", {"device": "/dev/vda1", "mount_point": "/boot/efi",
                            "fs_type": "vfat"}),
             Step("mount", {"device": "/dev/vda3", "mount_point": "/data", "fs_type": "xfs"})]
    r, _, _ = run(tmp_path, steps)
    assert sum(line.startswith("cp ") for line in r.lines()) == 1
    (copy,) = [line for line in r.lines() if line.startswith("cp ")]
    assert copy.startswith(f"cp -rL {tmp_path}/boot/efi/. ")
    assert f"mount -t vfat /dev/vda1 {tmp_path}/boot/efi" in r.writes()
