"""Old bcache devices on disks a run clears (issue 56): the wipe stops the bcache device and
its cache set (registered by the ramdisk's udev rule) before clearing their superblocks, and
a bcache device that also stands on a disk the plan does not name is refused before the first
write, as an md array is. lsblk calls a bcache device a disk: it is not one."""

import json

from provision_agent.drivers import bcache, blockinfo, wipe
from provision_agent.machine import spanning
from tests.unit.fakes import FakeRunner

# vda1 backs bcache0, cached by vda2 (its cache set); an ext4 on bcache0
TREE = {"blockdevices": [{"name": "vda", "path": "/dev/vda", "type": "disk", "children": [
    {"name": "vda1", "path": "/dev/vda1", "type": "part", "fstype": "bcache",
     "children": [{"name": "bcache0", "path": "/dev/bcache0", "type": "disk",
                   "fstype": "ext4"}]},
    {"name": "vda2", "path": "/dev/vda2", "type": "part", "fstype": "bcache",
     "children": [{"name": "bcache0", "path": "/dev/bcache0", "type": "disk",
                   "fstype": "ext4"}]}]}]}


def _inverse(path, *disks):
    return json.dumps({"blockdevices": [{"path": path, "type": "disk", "children": [
        {"path": d, "type": "disk"} for d in disks]}]})


def test_wipe_stops_the_device_then_the_set_then_clears_them(monkeypatch):
    """Before: the wipe saw bcache0 as a disk and stopped nothing; the registered set kept
    its superblock in the kernel, and udev registered it again from the next change event."""
    done = []
    monkeypatch.setattr(bcache, "stop_device", lambda d: done.append(("stop", d)))
    monkeypatch.setattr(bcache, "stop_set", lambda d: done.append(("stop set", d)))
    monkeypatch.setattr(wipe, "zero_edges", lambda d: done.append(("zero", d)))
    r = FakeRunner({"lsblk --json": json.dumps(TREE)})
    real_run = r.run
    r.run = lambda argv, **kw: done.append(("run", " ".join(argv))) or real_run(argv, **kw)
    wipe.wipe(r, "/dev/vda")
    order = [d for d in done if d[0] != "run" or d[1].startswith("wipefs")]
    assert order[0] == ("stop", "/dev/bcache0")
    # the cache device's set, and (harmlessly) the backing device's, before the wipefs
    assert ("stop set", "/dev/vda2") in order
    wipefs = order.index(("run", "wipefs --all --force /dev/vda1 /dev/vda2 /dev/vda"))
    assert all(order.index(x) < wipefs for x in order if x[0] in ("stop", "stop set"))


def test_disks_under_a_bcache_device_are_its_members_disks():
    runner = FakeRunner({"lsblk --json --inverse": _inverse("/dev/bcache0", "/dev/vda",
                                                            "/dev/vdb")})
    assert blockinfo.disks_under(runner, "/dev/bcache0") == ["/dev/vda", "/dev/vdb"]


def test_a_bcache_device_cached_on_a_disk_the_plan_does_not_name_is_refused():
    """Before: lsblk's type 'disk' hid it from the check, and the wipe of vda would have
    stopped bcache0 and cleared the superblock of a cache set on vdb, which is not ours."""
    runner = FakeRunner({"lsblk --json --inverse -o PATH,TYPE /dev/bcache0": _inverse(
        "/dev/bcache0", "/dev/vda", "/dev/vdb")})
    found = spanning.problems(runner, {"/dev/vda": TREE["blockdevices"][0]}, {"/dev/vda"})
    assert found and all(f == ("/dev/vda", found[0][1]) for f in found)
    assert found[0][1].startswith("bcache device /dev/bcache0 on /dev/vda also stands on "
                                  "/dev/vdb, which the plan does not name")
    assert spanning.problems(runner, {"/dev/vda": TREE["blockdevices"][0]},
                             {"/dev/vda", "/dev/vdb"}) == []
