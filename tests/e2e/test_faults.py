"""Disks that fail writes (issue 57): qemu's blkdebug driver fails every write that covers a
chosen sector of the second disk (vdb) with EIO, as a disk with a bad spot does.

- a RAID1 member's write error during md's initial resync (md absorbs it in its bad-block
  log and keeps both members "active sync"): with the default on_member_failure (fail) the run
  exits 4 naming vdb1 and vdb; with degrade the member is taken out, the run completes, and
  the result and the events name it;
- an I/O error while an image streams onto a partition of vdb, and one while mkfs writes a
  backup superblock there: exit 4 naming the disk, the step and the kernel's line.

After each failure nothing is mounted, no array is left assembled, and the disk the plan does
not name (vdc) reads back as it was. One VM (its vdb keeps its bad sectors) serves all cases,
each provisioning over what the last left. `tox -e e2e-faults` (marker `faults`, outside CI).
"""

import hashlib
import json
import os
import subprocess

import pytest

from tests.vmbench import VM, FileServer

pytestmark = pytest.mark.faults

MiB = 1 << 20
# vdb's bad sectors (512-byte units of the disk): 10 MiB into a partition starting at 1 MiB
# (inside a small RAID1 member and a 64 MiB partition an image streams onto), and 128 MiB into
# it, where mkfs.ext4 writes group 1's backup superblock on a 1 GiB partition (4 KiB blocks)
RESYNC_BAD = (1 + 10) * MiB // 512
MKFS_BAD = (1 + 128) * MiB // 512
FAILURES = ("fail", "degrade")


@pytest.fixture(scope="module")
def vm(ramdisk):
    with VM(disks=3, disk_size="2G", name="faults", ramdisk=ramdisk,
            io_errors={1: [{"sector": RESYNC_BAD}, {"sector": MKFS_BAD}]}) as machine:
        # a mark on the disk no layout names, to prove nothing writes to it
        machine.ssh("head -c 8M /dev/urandom > /dev/vdc; sync")
        machine.vdc_sha = edges_sha(machine, "/dev/vdc")
        yield machine


def edges_sha(vm, disk):
    return vm.ssh(f"(dd if={disk} bs=1M count=8 status=none; dd if={disk} bs=1M skip=2044 "
                  f"status=none) | sha256sum").stdout.split()[0]


def disk(disk_id, name, partitions):
    return {"id": disk_id, "match": {"name": name}, "table": "gpt", "partitions": partitions}


def raid1_doc(policy=None):
    raid = {"id": "md-root", "name": "root", "level": 1, "members": ["r0", "r1"]}
    if policy:
        raid["on_member_failure"] = policy
    return {"version": 1,
            "disks": [disk("d0", "/dev/vda", [{"id": "r0", "size": "64MiB", "type": "raid"}]),
                      disk("d1", "/dev/vdb", [{"id": "r1", "size": "64MiB", "type": "raid"}])],
            "raids": [raid],
            "filesystems": [{"device": "md-root", "type": "ext4", "mount": "/"}]}


def data_doc(size):
    """/ on vda, /srv on a partition of vdb starting at 1 MiB."""
    return {"version": 1,
            "disks": [disk("d0", "/dev/vda", [{"id": "root", "size": "256MiB"}]),
                      disk("d1", "/dev/vdb", [{"id": "srv", "size": size}])],
            "filesystems": [{"device": "root", "type": "ext4", "mount": "/"},
                            {"device": "srv", "type": "ext4", "mount": "/srv"}]}


def provision(vm, doc, *args):
    return vm.provision(doc, ["--debug", "--events_file", "/tmp/vmbench/events.jsonl",
                              "--plan_format", "json", *args])


def events(vm):
    text = vm.ssh("cat /tmp/vmbench/events.jsonl; rm -f /tmp/vmbench/events.jsonl").stdout
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def assert_left_clean(vm):
    """Nothing of the run mounted, no array assembled, vdc as it was."""
    mounts = vm.ssh("findmnt -rn -o SOURCE,TARGET").stdout
    assert "/dev/vd" not in mounts and "/dev/md" not in mounts, mounts
    mdstat = vm.mdstat()
    assert " : active" not in mdstat and " : inactive" not in mdstat, mdstat
    assert edges_sha(vm, "/dev/vdc") == vm.vdc_sha


def failed_message(run):
    lines = [line for line in run.stderr.splitlines() if line.startswith("provision: error:")]
    assert lines, run.stderr[-3000:]
    return lines[-1]


def test_raid1_member_write_error_stops_the_run_by_default(vm):
    run = provision(vm, raid1_doc())
    assert run.returncode == 4, run.stderr[-3000:] + run.log[-3000:]
    msg = failed_message(run)
    assert "RAID1 /dev/md/root: member /dev/vdb1 (disk /dev/vdb) failed" in msg, msg
    assert "bad-block log" in msg or "I/O error, dev vdb, sector" in msg, msg
    assert "on_member_failure is fail" in msg, msg
    result = [e for e in events(vm) if e["event"] == "result"][-1]
    assert result["exit_code"] == 4 and "/dev/vdb1" in result["message"], result
    assert_left_clean(vm)


def test_raid1_member_write_error_degrade_completes_without_it(vm):
    run = provision(vm, raid1_doc("degrade"))
    assert run.returncode == 0, run.stderr[-3000:] + run.log[-3000:]
    report = json.loads(run.stdout)
    [lost] = report["degraded"]
    assert (lost["array"], lost["member"], lost["disk"]) == ("/dev/md/root", "/dev/vdb1",
                                                             "/dev/vdb"), lost
    said = events(vm)
    assert any(e["event"] == "member_lost" and e["member"] == "/dev/vdb1" for e in said), said
    result = said[-1]
    assert result["event"] == "result" and result["exit_code"] == 0
    assert "/dev/vdb1" in result["message"], result
    detail = vm.mdadm_detail("/dev/md/root")
    assert "degraded" in detail and "Active Devices : 1" in detail, detail
    assert "/dev/vda1" in detail and "/dev/vdb1" not in detail, detail
    # the array holds the filesystem the run made on it
    assert vm.ssh("blkid -o value -s TYPE /dev/md/root").stdout.strip() == "ext4"
    assert edges_sha(vm, "/dev/vdc") == vm.vdc_sha


def make_ext4_image(tmp_path):
    """A 64 MiB ext4 filesystem image with 48 MiB of random data: no zero run at 10 MiB, where
    vdb fails, for the writer to skip."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "blob").write_bytes(os.urandom(48 * MiB))
    image = tmp_path / "srv" / "data.img"
    image.parent.mkdir()
    subprocess.run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-d", str(tree), str(image), "64M"],
                   check=True, capture_output=True)
    with open(image, "rb") as f:
        f.seek(10 * MiB)
        assert f.read(4096).strip(b"\0"), "the image is zero where the disk fails"
    return image


def test_io_error_while_an_image_streams(vm, tmp_path):
    image = make_ext4_image(tmp_path)
    doc = data_doc("64MiB")
    doc["filesystems"] = doc["filesystems"][:1]
    with FileServer(image.parent) as srv:
        doc["images"] = [{"uri": srv.guest_url(image.name), "format": "raw", "target": "srv",
                          "checksum": "sha256:" + hashlib.sha256(image.read_bytes()).hexdigest()}]
        run = provision(vm, doc)
    assert run.returncode == 4, run.stderr[-3000:] + run.log[-3000:]
    msg = failed_message(run)
    assert msg.startswith("provision: error: I/O error on disk /dev/vdb during step"), msg
    assert "(write_image:" in msg and "I/O error, dev vdb, sector" in msg, msg
    assert "The step's own error: writing /dev/vdb1 at byte" in msg, msg
    assert_left_clean(vm)


def test_io_error_during_mkfs(vm):
    run = provision(vm, data_doc("1GiB"))
    assert run.returncode == 4, run.stderr[-3000:] + run.log[-3000:]
    msg = failed_message(run)
    assert msg.startswith("provision: error: I/O error on disk /dev/vdb during step"), msg
    assert "(mkfs:" in msg and "I/O error, dev vdb, sector" in msg, msg
    assert "The step's own error: command 'mkfs.ext4" in msg, msg
    assert_left_clean(vm)
