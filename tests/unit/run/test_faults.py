"""What a run does when the kernel or md says a disk failed (run/faults.py, issue 57)."""

import io
import json
import os
import shutil

import pytest

from provision_agent.errors import CommandError, DiskFault, DiskGone
from provision_agent.plan.steps import make as Step
from provision_agent.run import faults
from provision_agent.run.events import Events
from provision_agent.run.executor import Executor
from tests.unit.drivers.test_md_health import RESYNC_BAD, fake_array
from tests.unit.fakes import FakeRunner

BOOT = "<6>[   47.709708]  vdb: vdb1 vdb2\n"
RESYNC_ERROR = ("<3>[   52.636408] I/O error, dev vdb, sector 21888 op 0x1:(WRITE) flags 0x0 "
                "phys_seg 245 prio class 0\n")
MKFS = Step("mkfs", {"device": "/dev/vdb2", "fs_type": "ext4", "label": None, "options": []},
            description="ext4 on /dev/vdb2")
MD = Step("md_create", {"device": "/dev/md127", "name": "root", "level": 1,
                        "members": ["/dev/vda1", "/dev/vdb1"], "on_member_failure": "fail"},
          description="RAID1 /dev/md127 over 2 members")


def fake_sysfs(root):
    """vda and vdb with two partitions each: 1 MiB..65 MiB and 65 MiB..1 GiB (512-byte
    units), as /sys/class/block shows them."""
    cls = root / "class"
    for disk in ("vda", "vdb", "vdc"):
        for n, (start, size) in enumerate(((2048, 131072), (133120, 1964032)), 1):
            part = cls / disk / f"{disk}{n}"
            part.mkdir(parents=True)
            (part / "start").write_text(f"{start}\n")
            (part / "size").write_text(f"{size}\n")
            (part / "partition").write_text(f"{n}\n")
            os.symlink(part, cls / f"{disk}{n}")
    return str(cls)


def watch(tmp_path, runner, disks=("/dev/vda", "/dev/vdb"), stream=None, members=None):
    block = tmp_path / "block"
    if members:
        fake_array(block, members)
    return faults.FaultWatch(runner, Events([stream] if stream else []), disks,
                             sys_class_block=fake_sysfs(tmp_path), sys_block=str(block))


def test_a_failed_step_with_a_kernel_io_error_names_disk_step_and_line(tmp_path):
    runner = FakeRunner({"dmesg --raw": BOOT})
    w = watch(tmp_path, runner)
    runner.answers["dmesg --raw"] = BOOT + RESYNC_ERROR.replace("21888", "140000")
    cause = CommandError(["mkfs.ext4", "/dev/vdb2"], 1, "",
                         "mkfs.ext4: Input/output error while writing out and closing file "
                         "system")
    with pytest.raises(DiskFault) as exc:
        w.after([(7, 9, MKFS)], cause)
    msg = str(exc.value)
    assert msg.startswith("I/O error on disk /dev/vdb during step 7/9 (mkfs: ext4 on "
                          "/dev/vdb2): the kernel logged: I/O error, dev vdb, sector 140000 "
                          "op 0x1:(WRITE)"), msg
    assert "replace it, or leave it out of the layout" in msg
    assert "nothing more was written to any disk" in msg
    assert msg.endswith("The step's own error: command 'mkfs.ext4 /dev/vdb2' exited with 1; "
                        "stderr: mkfs.ext4: Input/output error while writing out and closing "
                        "file system"), msg
    assert "\n" not in msg
    assert exc.value.exit_code == 4 and exc.value.disk == "/dev/vdb"
    assert exc.value.__cause__ is cause


def test_an_error_after_a_step_that_passed_stops_too_and_other_disks_are_not_ours(tmp_path):
    runner = FakeRunner({"dmesg --raw": BOOT})
    w = watch(tmp_path, runner)
    # a partition of a disk the plan does not name: not this run's to judge
    runner.answers["dmesg --raw"] = (BOOT + "<3>[ 60.0] Buffer I/O error on dev vdc1, logical "
                                     "block 9, lost async page write\n")
    w.after([(7, 9, MKFS)])
    runner.answers["dmesg --raw"] += ("<3>[ 61.0] Buffer I/O error on dev vdb2, logical block "
                                      "9, lost async page write\n")
    with pytest.raises(DiskFault, match=r"^I/O error on disk /dev/vdb during step 8/9 .*"
                                        r"Buffer I/O error on dev vdb2"):
        w.after([(8, 9, MKFS)])


def test_a_member_error_md_absorbed_fails_by_default_naming_the_member(tmp_path):
    runner = FakeRunner({"dmesg --raw": BOOT})
    w = watch(tmp_path, runner, members={
        "vda1": ("in_sync", 0, ""), "vdb1": ("in_sync,write_error,want_replacement", 0,
                                             RESYNC_BAD)})
    runner.answers["dmesg --raw"] = BOOT + RESYNC_ERROR
    with pytest.raises(DiskFault) as exc:
        w.after([(5, 9, MD)])
    msg = str(exc.value)
    assert msg.startswith("RAID1 /dev/md127: member /dev/vdb1 (disk /dev/vdb) failed: md state "
                          "in_sync,write_error,want_replacement; 5 range(s) in its bad-block "
                          "log"), msg
    assert "the kernel logged: I/O error, dev vdb, sector 21888" in msg
    assert "found after step 5/9 (md_create: RAID1 /dev/md127 over 2 members)" in msg
    assert "on_member_failure is fail (the default)" in msg
    assert not any(c[:2] == ["mdadm", "--manage"] for c in runner.calls)


def test_degrade_takes_the_member_out_once_and_says_so(tmp_path):
    runner = FakeRunner({"dmesg --raw": BOOT})
    stream = io.StringIO()
    md = Step("md_create", dict(MD.args, on_member_failure="degrade"), description="RAID1")
    w = watch(tmp_path, runner, stream=stream, members={
        "vda1": ("in_sync", 0, ""), "vdb1": ("in_sync,write_error", 0, RESYNC_BAD)})
    runner.answers["dmesg --raw"] = BOOT + RESYNC_ERROR
    w.after([(5, 9, md)])
    w.final(9)          # md still lists it in this fake: not taken out twice
    assert [c for c in runner.calls if c[0] == "mdadm"] == [
        ["mdadm", "--manage", "/dev/md127", "--fail", "/dev/vdb1"],
        ["mdadm", "--manage", "/dev/md127", "--remove", "/dev/vdb1"]]
    [lost] = w.lost
    assert (lost["array"], lost["member"], lost["disk"]) == ("/dev/md127", "/dev/vdb1",
                                                             "/dev/vdb")
    assert "bad-block log" in lost["reason"] and "sector 21888" in lost["reason"]
    [event] = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert event["event"] == "member_lost" and event["member"] == "/dev/vdb1"


def test_a_kernel_error_inside_a_member_is_the_arrays_even_without_bad_blocks(tmp_path):
    runner = FakeRunner({"dmesg --raw": BOOT})
    w = watch(tmp_path, runner, members={"vda1": ("in_sync", 0, ""),
                                         "vdb1": ("in_sync", 0, "")})
    runner.answers["dmesg --raw"] = BOOT + RESYNC_ERROR         # sector 21888 is in vdb1
    with pytest.raises(DiskFault, match="member /dev/vdb1 .* the kernel logged: I/O error"):
        w.after([(5, 9, MD)])


def test_the_executor_unmounts_then_stops_what_it_brought_up(tmp_path):
    runner = FakeRunner({"dmesg --raw": BOOT, "blkid": "1234-uuid\n"}, fail=("mkfs.ext4",))
    w = watch(tmp_path, runner)
    steps = [Step("vg_create", {"name": "vg0", "pvs": ["/dev/vda2"]}),
             Step("mount", {"device": "/dev/vda1", "mount_point": "/", "fs_type": "ext4",
                            "options": "defaults"}), MKFS]
    w.after([(1, 1, MD)])       # an array an earlier step made (md_create waits for its device)
    target = tmp_path / "t"
    original = w.after

    def with_error(done, failure=None):
        if done[0][2] is MKFS:
            runner.answers["dmesg --raw"] = BOOT + RESYNC_ERROR.replace("21888", "140000")
        return original(done, failure)
    w.after = with_error
    with pytest.raises(DiskFault, match="during step 3/3"):
        Executor(runner, Events(), str(target), faults=w).execute(steps)
    tail = [" ".join(c) for c in runner.calls if c[0] in ("umount", "vgchange", "mdadm")]
    assert tail[-3:] == [f"umount {target}", "vgchange -an vg0", "mdadm --stop /dev/md127"]


def test_degrade_that_md_refuses_stops_the_run_naming_why(tmp_path):
    runner = FakeRunner({"dmesg --raw": BOOT}, fail=("mdadm --manage",))
    md = Step("md_create", dict(MD.args, on_member_failure="degrade"), description="RAID1")
    w = watch(tmp_path, runner, members={"vda1": ("faulty", 0, ""),
                                         "vdb1": ("in_sync", 0, "")})
    with pytest.raises(DiskFault) as exc:
        w.after([(5, 9, md)])
    msg = str(exc.value)
    assert msg.startswith("RAID1 /dev/md127: member /dev/vda1 (disk /dev/vda) failed: md state "
                          "faulty; found after step 5/9"), msg
    assert ("on_member_failure is degrade, but md would not run without it (command 'mdadm "
            "--manage /dev/md127 --fail /dev/vda1' exited with 1") in msg, msg
    assert w.lost == []


def unplug(tmp_path, disk):
    """The disk and its partitions gone from the fake /sys/class/block."""
    cls = tmp_path / "class"
    shutil.rmtree(cls / disk)
    for link in cls.glob(f"{disk}*"):
        link.unlink()


WRITE = Step("write_image", {"device": "/dev/vdb1", "mount_point": None, "format": "raw",
                             "uri": "http://images/root.img"},
             description="raw image http://images/root.img to /dev/vdb1")


def test_a_disk_gone_after_a_step_that_passed_fails_that_step_naming_what_the_os_shows(
        tmp_path):
    runner = FakeRunner({"dmesg --raw": BOOT})
    w = watch(tmp_path, runner)
    unplug(tmp_path, "vdb")
    runner.answers["dmesg --raw"] = BOOT + ("<6>[ 70.1] virtio_net virtio0 ens2: link up\n"
                                            "<3>[ 70.2] Buffer I/O error on dev vdb1, logical "
                                            "block 9, lost async page write\n")
    with pytest.raises(DiskGone) as exc:
        w.after([(11, 16, WRITE)])
    msg = str(exc.value)
    assert msg.startswith("step 11/16 (write_image: raw image http://images/root.img to "
                          "/dev/vdb1): disk /dev/vdb went away (removed from the machine, or "
                          "its controller lost it): the kernel no longer lists it (no "
                          "/sys/block/vdb); the kernel logged: Buffer I/O error on dev vdb1, "
                          "logical block 9, lost async page write. Provision stopped there"), msg
    assert "ens2" not in msg and "\n" not in msg and exc.value.exit_code == 4


def test_the_watchs_disk_gone_gets_the_kernels_word_and_a_tools_error_is_told_as_its_own(
        tmp_path):
    runner = FakeRunner({"dmesg --raw": BOOT})
    w = watch(tmp_path, runner, disks=("/dev/vda", "/dev/vdb", "/dev/vdc"))
    unplug(tmp_path, "vda")
    watched = DiskGone("step 3/9 (mkfs /dev/vda2): disk /dev/vda went away (...)")
    with pytest.raises(DiskGone) as exc:
        w.after([(3, 9, MKFS)], watched)
    assert str(exc.value) == ("step 3/9 (mkfs /dev/vda2): disk /dev/vda went away (...); the "
                              "kernel logged nothing about it. " + faults.STOPPED)
    unplug(tmp_path, "vdc")
    cause = CommandError(["mkfs.ext4", "/dev/vdc2"], 1, "", "mkfs.ext4: Input/output error")
    with pytest.raises(DiskGone, match=r"^step 4/9 \(mkfs: ext4 on /dev/vdb2\): disk /dev/vda "
                                       r"went away .* The step's own error: command "
                                       r"'mkfs.ext4 /dev/vdc2' exited with 1"):
        w.after([(4, 9, MKFS)], cause)


def test_a_disk_absent_when_the_run_began_is_not_gone(tmp_path):
    runner = FakeRunner({"dmesg --raw": BOOT})
    w = watch(tmp_path, runner, disks=("/dev/vdb", "/dev/disk/by-path/ip-lun-0"))
    w.after([(1, 2, MKFS)])     # an iSCSI LUN the run logs in to comes later


def test_after_a_disk_went_away_the_executor_unmounts_and_stops_what_it_brought_up(tmp_path):
    runner = FakeRunner({"dmesg --raw": BOOT, "blkid": "1234-uuid\n"})
    w = watch(tmp_path, runner)
    steps = [Step("vg_create", {"name": "vg0", "pvs": ["/dev/vda2"]}),
             Step("mount", {"device": "/dev/vda1", "mount_point": "/", "fs_type": "ext4",
                            "options": "defaults"}), MKFS]
    target = tmp_path / "t"
    ex = Executor(runner, Events(), str(target), faults=w)
    ex.handlers["mkfs"] = lambda step: unplug(tmp_path, "vdb")
    with pytest.raises(DiskGone, match=r"^step 3/3 \(mkfs: ext4 on /dev/vdb2\): disk /dev/vdb"):
        ex.execute(steps)
    tail = [" ".join(c) for c in runner.calls if c[0] in ("umount", "vgchange")]
    assert tail[-2:] == [f"umount {target}", "vgchange -an vg0"]


BCACHE = Step("bcache_create", {"device": "/dev/bcache/by-label/data", "name": "data",
                                "backing": "/dev/vdb2", "cache": "/dev/vda2",
                                "cache_mode": "writeback", "block_size": 4096,
                                "format_cache": True}, description="bcache data")


def test_after_a_stop_the_bcache_devices_and_cache_sets_it_registered_are_stopped(
        tmp_path, monkeypatch):
    from provision_agent.drivers import bcache
    runner = FakeRunner({"dmesg --raw": BOOT, "blkid": "1234-uuid\n"}, fail=("mkfs.ext4",))
    w = watch(tmp_path, runner, members={"vda1": ("in_sync", 0, ""), "vdb1": ("in_sync", 0, "")})
    cls = tmp_path / "class"
    cset = tmp_path / "fs" / "cset-uuid"
    stopped = []

    def register(step):     # what the kernel shows once bcache_create registered them
        (cls / "vdb" / "vdb2" / "bcache").mkdir()
        (cls / "vda" / "vda2" / "bcache").mkdir()
        cset.mkdir(parents=True)
        os.symlink(cset, cls / "vda" / "vda2" / "bcache" / "set")

    def kernel(path, value):      # a stop written: the kernel unregisters it
        stopped.append((os.path.relpath(path, tmp_path), value))
        if os.path.basename(path) == "stop":
            shutil.rmtree(os.path.dirname(path))

    monkeypatch.setattr(bcache, "_write", kernel)
    steps = [MD, BCACHE, MKFS]
    ex = Executor(runner, Events(), str(tmp_path / "t"), faults=w)
    ex.handlers.update(md_create=lambda step: None, bcache_create=register)
    original = w.after

    def with_error(done, failure=None):
        if done[0][2] is MKFS:
            runner.answers["dmesg --raw"] = BOOT + RESYNC_ERROR.replace("21888", "140000")
        return original(done, failure)
    w.after = with_error
    with pytest.raises(DiskFault, match="during step 3/3"):
        ex.execute(steps)
    assert stopped == [("class/vdb2/bcache/stop", "1"), ("fs/cset-uuid/stop", "1")]
    assert not (cls / "vdb2" / "bcache").exists() and not cset.exists()
    assert runner.lines()[-1] == "mdadm --stop /dev/md127"      # the array under it, after


def test_a_bcache_device_that_will_not_stop_is_said_and_the_rest_still_taken_down(
        tmp_path, monkeypatch, caplog):
    from provision_agent.drivers import bcache
    monkeypatch.setattr(bcache, "WAIT", 0.2)
    runner = FakeRunner({"dmesg --raw": BOOT})
    w = watch(tmp_path, runner)
    w.after([(1, 3, MD), (2, 3, BCACHE)])
    (tmp_path / "class" / "vdb" / "vdb2" / "bcache").mkdir()    # never goes
    w.teardown()
    assert "bcache on /dev/vdb2: " in caplog.text and "did not stop" in caplog.text
    assert runner.lines()[-1] == "mdadm --stop /dev/md127"


def test_the_bootloader_leaves_out_the_disk_that_lost_a_member(tmp_path, monkeypatch):
    """Under on_member_failure degrade the run goes on without vdb2: grub must not go onto
    vdb (its disk fails writes: a bad spot where grub goes failed the run the policy let go
    on, 2026-11-29) nor an ESP copy onto vdb1; the machine boots from vda."""
    from provision_agent.drivers import bootloader as loader
    from provision_agent.run import system_steps
    monkeypatch.setattr(faults, "SYS_CLASS_BLOCK", fake_sysfs(tmp_path))
    seen = []
    monkeypatch.setattr(loader, "install_report",
                        lambda runner, root, args: seen.append(args) or {"boot_mode": "bios"})
    lost = {"array": "/dev/md/root", "member": "/dev/vdb2", "disk": "/dev/vdb",
            "reason": "md state faulty", "found_after": "step 10/16"}
    executor = type("E", (), {"runner": None, "root": "/t",
                              "faults": type("W", (), {"lost": [lost]})()})()
    step = Step("bootloader", {"type": "grub2", "boot_mode": "auto",
                               "targets": ["/dev/vda", "/dev/vdb"],
                               "uefi_targets": ["/dev/vda1", "/dev/vdb1"],
                               "esp_copies": ["/dev/vdb1"]})
    system_steps.bootloader(executor, step)
    assert seen[-1]["targets"] == ["/dev/vda"], seen[-1]
    assert seen[-1]["uefi_targets"] == ["/dev/vda1"] and seen[-1]["esp_copies"] == []
    assert step.args["targets"] == ["/dev/vda", "/dev/vdb"]     # the plan stays as it was
    # nothing lost: the step's own args; every target lost: those too (nothing else boots)
    executor.faults.lost = []
    system_steps.bootloader(executor, step)
    assert seen[-1] == step.args
    executor.faults.lost = [lost, dict(lost, disk="/dev/vda", member="/dev/vda2")]
    system_steps.bootloader(executor, step)
    assert seen[-1]["targets"] == ["/dev/vda", "/dev/vdb"]
