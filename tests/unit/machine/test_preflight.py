"""Wiping order and the preflight safety checks, with a scripted runner."""

import json
from types import SimpleNamespace

import pytest

from provision_agent.drivers import wipe
from provision_agent.errors import MachineMismatch
from provision_agent.machine import preflight
from provision_agent.plan.steps import make as Step
from tests.unit.fakes import FakeRunner

# vda1 + vdb1 form md0; md0 is an LVM PV of VG "old"; vda2 holds an ext4 filesystem.
TREE = {"blockdevices": [{
    "name": "vda", "path": "/dev/vda", "type": "disk", "fstype": None, "children": [
        {"name": "vda1", "path": "/dev/vda1", "type": "part", "fstype": "linux_raid_member",
         "children": [{"name": "md0", "path": "/dev/md0", "type": "raid1",
                       "fstype": "LVM2_member",
                       "children": [{"name": "old-root", "path": "/dev/mapper/old-root",
                                     "type": "lvm", "fstype": "ext4"}]}]},
        {"name": "vda2", "path": "/dev/vda2", "type": "part", "fstype": "ext4"}]}]}
PVS = {"report": [{"pv": [{"pv_name": "/dev/md0", "vg_name": "old"},
                          {"pv_name": "/dev/sdz1", "vg_name": "elsewhere"}]}]}


def runner():
    return FakeRunner({"lsblk --json": json.dumps(TREE), "pvs --reportformat": json.dumps(PVS)})


def test_wipe_tears_down_from_the_top(monkeypatch):
    zeroed = []
    monkeypatch.setattr(wipe, "zero_edges", zeroed.append)
    r = runner()
    wipe.wipe(r, "/dev/vda")
    writes = r.writes()
    assert writes.index("vgchange --activate n old") < writes.index("mdadm --stop /dev/md0")
    assert writes.index("mdadm --stop /dev/md0") < writes.index(
        "mdadm --zero-superblock /dev/vda1")
    assert writes[-2:] == ["wipefs --all --force /dev/vda1 /dev/vda2 /dev/vda",
                           "sgdisk --zap-all /dev/vda"]
    assert not any("elsewhere" in w or "sdz" in w for w in writes)
    assert zeroed == ["/dev/vda"]


def test_wipe_asks_lvm_only_when_a_volume_group_is_mapped_above_the_disk(monkeypatch):
    monkeypatch.setattr(wipe, "zero_edges", lambda d: None)
    r = runner()
    wipe.wipe(r, "/dev/vda")
    assert sum(line.startswith("pvs ") for line in r.lines()) == 1
    # the same disk with no device-mapper node above it: an old PV there is not held by anything
    plain = {"blockdevices": [dict(TREE["blockdevices"][0], children=[
        {"name": "vda1", "path": "/dev/vda1", "type": "part", "fstype": "LVM2_member"},
        {"name": "vda2", "path": "/dev/vda2", "type": "part", "fstype": "ext4"}])]}
    r = FakeRunner({"lsblk --json": json.dumps(plain), "pvs --reportformat": json.dumps(PVS)})
    wipe.wipe(r, "/dev/vda")
    assert not any(line.startswith(("pvs ", "vgchange ")) for line in r.lines())
    assert "wipefs --all --force /dev/vda1 /dev/vda2 /dev/vda" in r.writes()  # its PV label too


def test_wipe_with_keep_leaves_the_partition_and_the_table(monkeypatch):
    monkeypatch.setattr(wipe, "zero_edges", lambda d: pytest.fail("zeroed a disk with keep"))
    r = runner()
    wipe.wipe(r, "/dev/vda", keep=[2])
    writes = r.writes()
    assert not any("/dev/vda2" in w for w in writes)
    assert not any(w.endswith(" /dev/vda") for w in writes)
    assert "wipefs --all --force /dev/vda1" in writes


def planned(disks, steps=()):
    layout = SimpleNamespace(disks=[SimpleNamespace(id=i, origin=f"disks[{n}]")
                                    for n, i in enumerate(disks)])
    return SimpleNamespace(resolved=SimpleNamespace(layout=layout, disks=disks),
                           steps=list(steps))


LIVE = [{"name": "/dev/vda", "size": 4 << 30, "serial": "disk0"},
        {"name": "/dev/vdb", "size": 2 << 30, "serial": "disk1"}]


def problems(plan, live=LIVE, mounted=None, swaps=(), answers=None):
    r = FakeRunner(answers or {"lsblk --json": json.dumps({"blockdevices": []})})
    with pytest.raises(MachineMismatch) as exc:
        preflight.check(plan, live, r, mounted=mounted or {}, swaps=list(swaps))
    assert r.writes() == [], "preflight must only read"
    return [str(p) for p in exc.value.problems]


def test_preflight_passes_on_a_matching_machine():
    r = FakeRunner({"lsblk --json": json.dumps({"blockdevices": []})})
    preflight.check(planned({"d0": {"name": "/dev/vda", "size": 4 << 30, "serial": "disk0"}}),
                    LIVE, r, mounted={"/dev/sr0": "/media"}, swaps=[])


def test_preflight_missing_small_and_serial():
    plan = planned({"d0": {"name": "/dev/vdc", "size": 1 << 30},
                    "d1": {"name": "/dev/vdb", "size": 4 << 30},
                    "d2": {"name": "/dev/vda", "size": 1 << 30, "serial": "other"}})
    found = problems(plan)
    assert "disks[0]: /dev/vdc is not present on this machine" in found
    assert any(p.startswith("disks[1]: /dev/vdb has 2147483648 bytes") for p in found)
    assert any("serial disk0, the plan was made for serial other" in p for p in found)


def test_preflight_refuses_a_disk_in_use():
    tree = {"blockdevices": [{"path": "/dev/vda", "type": "disk", "children": [
        {"path": "/dev/vda1", "type": "part"}, {"path": "/dev/vda2", "type": "part"}]}]}
    found = problems(planned({"d0": {"name": "/dev/vda", "size": 1 << 30}}),
                     mounted={"/dev/vda1": "/mnt"}, swaps=["/dev/vda2"],
                     answers={"lsblk --json": json.dumps(tree)})
    assert "disks[0]: /dev/vda is in use: /dev/vda1 is mounted at /mnt" in found
    assert "disks[0]: /dev/vda is in use: /dev/vda2 is in use as swap" in found


def test_preflight_reads_every_disk_with_one_lsblk_and_finds_use_on_the_second():
    tree = {"blockdevices": [
        {"path": "/dev/vda", "type": "disk", "children": [{"path": "/dev/vda1", "type": "part"}]},
        {"path": "/dev/vdb", "type": "disk", "children": [{"path": "/dev/vdb1", "type": "part"}]}]}
    r = FakeRunner({"lsblk --json": json.dumps(tree)})
    with pytest.raises(MachineMismatch) as exc:
        preflight.check(planned({"d0": {"name": "/dev/vda", "size": 1 << 30},
                                 "d1": {"name": "/dev/vdb", "size": 1 << 30}}),
                        LIVE, r, mounted={"/dev/vdb1": "/mnt"}, swaps=[])
    assert [str(p) for p in exc.value.problems] == [
        "disks[1]: /dev/vdb is in use: /dev/vdb1 is mounted at /mnt"]
    assert [c[-2:] for c in r.calls if c[0] == "lsblk"] == [["/dev/vda", "/dev/vdb"]]


def test_preflight_checks_kept_partitions_against_the_disk():
    step = Step("partition", {"disk": "/dev/vda", "number": 1, "device": "/dev/vda1",
                              "offset": 1048576, "size": 1048576, "sector_size": 512,
                              "type": "0x83", "keep": True})
    table = {"partitiontable": {"partitions": [{"node": "/dev/vda1", "start": 4096,
                                                "size": 2048}]}}
    found = problems(planned({"d0": {"name": "/dev/vda", "size": 1 << 30}}, [step]),
                     answers={"lsblk --json": json.dumps({"blockdevices": []}),
                              "sfdisk --json": json.dumps(table)})
    assert found == ["/dev/vda: partition 1 to keep is at bytes 2097152-3145727 (512-byte "
                     "sectors 4096-6143), the layout puts it at bytes 1048576-2097151"]


def test_clear_new_takes_down_what_udev_assembled_from_old_contents():
    # a fresh partition at an old member's offsets: udev assembled md0 and activated VG "old"
    tree = {"blockdevices": [{"path": "/dev/vda1", "type": "part", "fstype":
                              "linux_raid_member", "children": TREE["blockdevices"][0]
                              ["children"][0]["children"]}]}
    r = FakeRunner({"lsblk --json": json.dumps(tree), "pvs --reportformat": json.dumps(PVS)})
    wipe.clear_new(r, ["/dev/vda1"])
    assert r.writes() == ["vgchange --activate n old", "mdadm --stop /dev/md0",
                          "mdadm --zero-superblock /dev/vda1", "wipefs --all --force /dev/vda1"]


def test_new_devices_are_cleared_with_one_lsblk_and_one_wipefs(monkeypatch):
    # lsblk names /dev/md/boot by its own path; the old member found under vda2 is zeroed
    # and an old array that udev assembled from two of them is stopped once
    old = {"path": "/dev/md0", "type": "raid1", "fstype": None}
    tree = {"blockdevices": [
        {"path": "/dev/vda1", "type": "part", "fstype": "linux_raid_member", "children": [old]},
        {"path": "/dev/vda2", "type": "part", "fstype": "linux_raid_member", "children": [old]},
        {"path": "/dev/md127", "type": "raid1", "fstype": "ext4"}]}
    monkeypatch.setattr(wipe.blockinfo.os.path, "realpath",
                        lambda p: "/dev/md127" if p == "/dev/md/boot" else p)
    r = FakeRunner({"lsblk --json": json.dumps(tree)})
    wipe.clear_new(r, ["/dev/vda1", "/dev/vda2", "/dev/md/boot"])
    assert [c for c in r.lines() if c.startswith("lsblk")] == [
        "lsblk --json --bytes -o NAME,PATH,TYPE,FSTYPE,LABEL,MOUNTPOINT,SIZE /dev/vda1 "
        "/dev/vda2 /dev/md/boot"]
    assert r.writes() == ["mdadm --stop /dev/md0", "mdadm --zero-superblock /dev/vda1",
                          "mdadm --zero-superblock /dev/vda2",
                          "wipefs --all --force /dev/vda1 /dev/vda2 /dev/md/boot"]
    assert [n["path"] for n in wipe.blockinfo.trees(r, ["/dev/md/boot", "/dev/vdz"])] == [
        "/dev/md127", "/dev/vdz"]


def test_preflight_refuses_a_vg_name_taken_on_a_disk_outside_the_plan():
    pvs = {"report": [{"pv": [{"pv_name": "/dev/vdc4", "vg_name": "os"},
                              {"pv_name": "/dev/vda4", "vg_name": "os"},
                              {"pv_name": "[unknown]", "vg_name": "os"},
                              {"pv_name": "/dev/vdc5", "vg_name": "other"}]}]}
    inverse = {"blockdevices": [{"path": "/dev/vdc4", "type": "part",
                                 "children": [{"path": "/dev/vdc", "type": "disk"}]}]}
    steps = [Step("vg_create", {"name": "os", "pvs": ["/dev/md/os"]})]
    found = problems(planned({"d0": {"name": "/dev/vda", "size": 1 << 30}}, steps),
                     answers={"lsblk --json --bytes": json.dumps({"blockdevices": []}),
                              "lsblk --json --inverse -o PATH,TYPE /dev/vdc4": json.dumps(inverse),
                              "lsblk --json --inverse": json.dumps({"blockdevices": [
                                  {"path": "/dev/vda4", "type": "part", "children": [
                                      {"path": "/dev/vda", "type": "disk"}]}]}),
                              "pvs --reportformat": json.dumps(pvs)})
    assert found == ["volume group os: the name is taken by an existing volume group with "
                     "physical volume /dev/vdc4 on /dev/vdc, which this plan does not touch; "
                     "rename the volume group in the input, or clear that disk first"]


def test_preflight_asks_lvm_about_names_only_when_the_plan_makes_a_volume_group():
    steps = [Step("partition", {"disk": "/dev/vda", "number": 1, "device": "/dev/vda1",
                                "offset": 1048576, "size": 1048576, "sector_size": 512,
                                "type": "0x83"})]
    r = FakeRunner({"lsblk --json": json.dumps({"blockdevices": []})})
    preflight.check(planned({"d0": {"name": "/dev/vda", "size": 1 << 30}}, steps), LIVE, r,
                    mounted={}, swaps=[])
    assert not [c for c in r.lines() if c.startswith("pvs")], r.lines()


def test_preflight_lets_the_wipe_free_a_vg_name_held_by_planned_disks_only():
    pvs = {"report": [{"pv": [{"pv_name": "/dev/md0", "vg_name": "os"}]}]}
    inverse = {"blockdevices": [{"path": "/dev/md0", "type": "raid1", "children": [
        {"path": "/dev/vda1", "type": "part", "children": [{"path": "/dev/vda", "type": "disk"}]},
        {"path": "/dev/vdb1", "type": "part",
         "children": [{"path": "/dev/vdb", "type": "disk"}]}]}]}
    r = FakeRunner({"lsblk --json --bytes": json.dumps({"blockdevices": []}),
                    "lsblk --json --inverse": json.dumps(inverse),
                    "pvs --reportformat": json.dumps(pvs)})
    steps = [Step("vg_create", {"name": "os", "pvs": ["/dev/md/os"]})]
    preflight.check(planned({"d0": {"name": "/dev/vda", "size": 1 << 30},
                             "d1": {"name": "/dev/vdb", "size": 1 << 30}}, steps),
                    LIVE, r, mounted={}, swaps=[])
    assert r.writes() == []


def _layout_with(hints, from_inventory=False):
    layout = SimpleNamespace(disks=[SimpleNamespace(id="d0", origin="disks[0]", hints=hints,
                                                    from_inventory=from_inventory)])
    return SimpleNamespace(resolved=SimpleNamespace(layout=layout,
                                                    disks={"d0": {"name": "/dev/sdb",
                                                                  "size": 1 << 30}}),
                           steps=[])


EMPTY = {"blockdevices": [{"name": "sdb", "path": "/dev/sdb", "type": "disk", "children": []}]}


def test_a_removable_disk_is_refused_unless_named():
    live = [{"name": "/dev/sdb", "size": 1 << 30, "removable": True}]
    r = FakeRunner({"lsblk --json": json.dumps(EMPTY), "pvs --reportformat": "{}"})
    with pytest.raises(MachineMismatch, match="/dev/sdb is removable"):
        preflight.check(_layout_with({"size": ">= 1"}), live, r, mounted={}, swaps=[])
    preflight.check(_layout_with({"serial": "USB123"}), live, r, mounted={}, swaps=[])


def test_a_usb_disk_that_does_not_flag_itself_removable_is_refused_unless_named():
    """qemu's usb-storage and many USB hard disks say removable 0: the transport tells. A
    recorded inventory's size rule could find it; the live machine's preflight refuses it."""
    live = [{"name": "/dev/sdb", "size": 1 << 30, "removable": False, "tran": "usb"}]
    r = FakeRunner({"lsblk --json": json.dumps(EMPTY), "pvs --reportformat": "{}"})
    with pytest.raises(MachineMismatch, match="/dev/sdb is removable"):
        preflight.check(_layout_with({"size": ">= 1"}), live, r, mounted={}, swaps=[])
    preflight.check(_layout_with({"hctl": "2:0:0:0"}), live, r, mounted={}, swaps=[])


def test_a_serial_picked_from_the_inventory_does_not_name_a_removable_disk():
    """Ironic's RAID interface names every inventoried disk by its serial; that is not the
    operator naming the USB stick among them (issue 52 item 3)."""
    live = [{"name": "/dev/sdb", "size": 1 << 30, "removable": True}]
    r = FakeRunner({"lsblk --json": json.dumps(EMPTY), "pvs --reportformat": "{}"})
    with pytest.raises(MachineMismatch, match="/dev/sdb is removable"):
        preflight.check(_layout_with({"serial": "USB123"}, from_inventory=True), live, r,
                        mounted={}, swaps=[])


def test_the_virtual_media_the_ramdisk_booted_from_is_refused():
    tree = {"blockdevices": [{"name": "sdb", "path": "/dev/sdb", "type": "disk",
                              "label": "VMEDIA_BOOT_ISO", "children": []}]}
    r = FakeRunner({"lsblk --json": json.dumps(tree), "pvs --reportformat": "{}"})
    with pytest.raises(MachineMismatch, match="the medium a ramdisk boots from"):
        preflight.check(_layout_with({"serial": "x"}), [{"name": "/dev/sdb", "size": 1 << 30}],
                        r, mounted={}, swaps=[])


KEEP_VG = Step("vg_activate", {"name": "data", "pvs": ["/dev/vda4", "/dev/vdb4"],
                               "lvs": ["srv", "glance"], "devices": []})


def _pvs(*pairs):
    return json.dumps({"report": [{"pv": [{"pv_name": p, "vg_name": v} for p, v in pairs]}]})


def _lvs(*names):
    return json.dumps({"report": [{"lv": [{"lv_name": n} for n in names]}]})


@pytest.mark.parametrize("pvs, lvs, expected", [
    # no such VG at all
    (_pvs(("/dev/vda4", "other")), _lvs(), ["volume group data to keep is not on this machine"]),
    # a PV on a disk the plan does not keep, one planned partition not in it, an LV gone
    (_pvs(("/dev/vda4", "data"), ("/dev/vdc1", "data"), ("/dev/vdb4", "x")), _lvs("srv"),
     ["volume group data to keep also has physical volume(s) /dev/vdc1, which the plan does "
      "not keep", "/dev/vdb4: not a physical volume of data now",
      "volume group data to keep has no logical volume glance (it has: srv)"]),
    # a PV missing
    (_pvs(("/dev/vda4", "data"), ("/dev/vdb4", "data"), ("[unknown]", "data")),
     _lvs("srv", "glance"), ["volume group data to keep is missing a physical volume"]),
])
def test_preflight_checks_a_kept_volume_group(pvs, lvs, expected):
    found = problems(planned({"d0": {"name": "/dev/vda", "size": 1 << 30}}, [KEEP_VG]),
                     answers={"lsblk --json": json.dumps({"blockdevices": []}),
                              "pvs --reportformat": pvs, "lvs --reportformat": lvs})
    assert len(found) == len(expected), found
    for got, want in zip(found, expected):
        assert got.startswith("volume group data: " + want), got


def test_preflight_passes_a_kept_volume_group_as_planned():
    r = FakeRunner({"lsblk --json": json.dumps({"blockdevices": []}),
                    "pvs --reportformat": _pvs(("/dev/vda4", "data"), ("/dev/vdb4", "data")),
                    "lvs --reportformat": _lvs("srv", "glance", "extra")})
    preflight.check(planned({"d0": {"name": "/dev/vda", "size": 4 << 30}}, [KEEP_VG]),
                    LIVE, r, mounted={}, swaps=[])
    assert r.writes() == []


def test_wipe_keeping_the_only_partition_runs_no_empty_wipefs(monkeypatch):
    monkeypatch.setattr(wipe, "zero_edges", lambda d: pytest.fail("zeroed a disk with keep"))
    one = {"blockdevices": [dict(TREE["blockdevices"][0], children=[
        {"name": "vda1", "path": "/dev/vda1", "type": "part", "fstype": "xfs"}])]}
    r = FakeRunner({"lsblk --json": json.dumps(one)})
    wipe.wipe(r, "/dev/vda", keep=[1])
    assert r.writes() == []


def esp_on_vda():
    """What a UEFI boot stands on (checked when boot_mode auto finds a UEFI machine): an ESP
    on the target disk, mounted at /boot/efi."""
    return [Step("partition", {"disk": "/dev/vda", "number": 1, "device": "/dev/vda1",
                               "offset": 1 << 20, "size": 512 << 20, "sector_size": 512,
                               "type": "C12A7328-F81F-11D2-BA4B-00A0C93EC93B"}),
            Step("mount", {"device": "/dev/vda1", "mount_point": "/boot/efi",
                           "fs_type": "vfat"})]


def test_preflight_refuses_secure_boot_when_auto_finds_a_bios_machine(monkeypatch):
    from provision_agent.drivers import bootloader
    disks = {"d0": {"name": "/dev/vda", "size": 4 << 30, "serial": "disk0"}}
    step = Step("bootloader", {"type": "grub2", "boot_mode": "auto", "targets": ["/dev/vda"],
                               "secure_boot": True}, "grub2")
    monkeypatch.setattr(bootloader, "boot_mode", lambda wanted: "bios")
    assert problems(planned(disks, [step])) == [
        "bootloader: secure_boot needs UEFI, but this machine booted the ramdisk in BIOS mode "
        "and the layout says boot_mode auto"]
    monkeypatch.setattr(bootloader, "boot_mode", lambda wanted: "uefi")
    preflight.check(planned(disks, esp_on_vda() + [step]), LIVE,
                    FakeRunner({"lsblk --json": json.dumps({"blockdevices": []})}),
                    mounted={}, swaps=[])


@pytest.mark.parametrize("want,have,said", [
    # a plan for 512-byte sectors on a disk reformatted to 4Kn
    ({"logical_block_size": 512, "physical_block_size": 512},
     {"logical_block_size": 4096, "physical_block_size": 4096},
     "/dev/vda has 4096-byte logical sectors, the plan was made for 512: plan again"),
    # an old inventory that does not record them: 512 assumed, and said so
    ({}, {"logical_block_size": 4096, "physical_block_size": 4096},
     "the plan was made for 512 (assumed: its inventory did not record them)"),
    ({"logical_block_size": 4096, "physical_block_size": 4096},
     {"logical_block_size": 512, "physical_block_size": 512},
     "/dev/vda has 512-byte logical sectors, the plan was made for 4096"),
])
def test_preflight_refuses_a_plan_for_other_sectors_than_the_disks(want, have, said):
    found = problems(planned({"d0": {"name": "/dev/vda", "size": 4 << 30, **want}}),
                     live=[{"name": "/dev/vda", "size": 4 << 30, **have}])
    assert len(found) == 1 and said in found[0], found


def test_preflight_takes_a_512e_disk_for_a_plan_that_assumed_512():
    """1 MiB alignment is whole 4096-byte physical blocks: a plan from an inventory that did
    not record block sizes runs on a 512e disk unchanged."""
    r = FakeRunner({"lsblk --json": json.dumps({"blockdevices": []})})
    preflight.check(planned({"d0": {"name": "/dev/vda", "size": 4 << 30}}),
                    [{"name": "/dev/vda", "size": 4 << 30, "logical_block_size": 512,
                      "physical_block_size": 4096}], r, mounted={}, swaps=[])


@pytest.mark.parametrize("blkid,says", [
    ("xfs\n", "/dev/vda1: the kept filesystem for / is xfs, the layout says ext4"),
    ("", "/dev/vda1: the kept partition for / holds no filesystem, the layout says ext4"),
    ("ext4\n", None)])
def test_preflight_checks_a_kept_root_holds_the_filesystem_the_layout_says(blkid, says):
    """A kept / is mounted to take the image: one of another type (or none) would stop the
    run at its mount, after the tables were edited; refused before the first write."""
    part = Step("partition", {"disk": "/dev/vda", "number": 1, "device": "/dev/vda1",
                              "offset": 1048576, "size": 1048576, "sector_size": 512,
                              "type": "0x83", "keep": True})
    mount = Step("mount", {"device": "/dev/vda1", "mount_point": "/", "fs_type": "ext4"})
    table = {"partitiontable": {"partitions": [{"node": "/dev/vda1", "start": 2048,
                                                "size": 2048}]}}
    plan = planned({"d0": {"name": "/dev/vda", "size": 1 << 30}}, [part, mount])
    answers = {"lsblk --json": json.dumps({"blockdevices": []}),
               "sfdisk --json": json.dumps(table), "blkid -p -s TYPE -o value /dev/vda1": blkid}
    if says is None:
        preflight.check(plan, LIVE, FakeRunner(answers), mounted={}, swaps=[])
        return
    assert problems(plan, answers=answers) == [
        says + ": correct its type in the layout, or do not keep it"]


def test_preflight_refuses_bios_boot_from_a_4kn_disk_when_auto_finds_a_bios_machine(
        monkeypatch):
    """boot_mode auto is only known in the ramdisk: a BIOS machine cannot boot the 4Kn disk
    (plan/blocks.py refuses boot_mode bios at plan time); UEFI, or a 512e disk, runs."""
    from provision_agent.drivers import bootloader
    kn = {"logical_block_size": 4096, "physical_block_size": 4096}
    disks = {"d0": {"name": "/dev/vda", "size": 4 << 30, **kn}}
    live = [{"name": "/dev/vda", "size": 4 << 30, **kn}]
    step = Step("bootloader", {"type": "grub2", "boot_mode": "auto", "targets": ["/dev/vda"]},
                "grub2")
    monkeypatch.setattr(bootloader, "boot_mode", lambda wanted: "bios")
    assert problems(planned(disks, [step]), live=live) == [
        "bootloader: this machine booted the ramdisk in BIOS mode (the layout says boot_mode "
        "auto), and BIOS cannot boot /dev/vda, a disk of 4096-byte logical sectors (4Kn): "
        "boot the machine in UEFI mode, or put the bootloader on a disk of 512-byte logical "
        "sectors"]
    ok = FakeRunner({"lsblk --json": json.dumps({"blockdevices": []})})
    e512 = {"logical_block_size": 512, "physical_block_size": 4096}
    preflight.check(planned({"d0": dict(disks["d0"], **e512)}, [step]),
                    [dict(live[0], **e512)], ok, mounted={}, swaps=[])
    monkeypatch.setattr(bootloader, "boot_mode", lambda wanted: "uefi")
    preflight.check(planned(disks, esp_on_vda() + [step]), live, ok, mounted={}, swaps=[])


# vda1 and vdf1 form md127; vda2 and vdf2 are the physical volumes of VG "oldvg": the plan
# names vda only, so clearing it would break an array and a group that live on vdf too.
SPANNING_TREE = {"blockdevices": [{"name": "vda", "path": "/dev/vda", "type": "disk",
                                   "children": [
    {"name": "vda1", "path": "/dev/vda1", "type": "part", "fstype": "linux_raid_member",
     "children": [{"name": "md127", "path": "/dev/md127", "type": "raid1", "fstype": "ext4"}]},
    {"name": "vda2", "path": "/dev/vda2", "type": "part", "fstype": "LVM2_member",
     "children": [{"name": "oldvg-data", "path": "/dev/mapper/oldvg-data", "type": "lvm"}]}]}]}
SPANNING_PVS = {"report": [{"pv": [{"pv_name": "/dev/vda2", "vg_name": "oldvg"},
                                   {"pv_name": "/dev/vdf2", "vg_name": "oldvg"},
                                   {"pv_name": "/dev/vdg1", "vg_name": "elsewhere"}]}]}


def _inverse(path, *disks):
    return json.dumps({"blockdevices": [{"path": path, "type": "x", "children": [
        {"path": d, "type": "disk"} for d in disks]}]})


def test_preflight_refuses_arrays_and_groups_that_also_stand_on_a_disk_it_does_not_name():
    """Before: the wipe of vda stopped md127 and deactivated oldvg, then zeroed vda1's
    superblock and vda2's label: the array and the group on vdf were left broken."""
    answers = {"lsblk --json --bytes": json.dumps(SPANNING_TREE),
               "lsblk --json --inverse -o PATH,TYPE /dev/md127": _inverse(
                   "/dev/md127", "/dev/vda", "/dev/vdf"),
               "lsblk --json --inverse -o PATH,TYPE /dev/vda2": _inverse("/dev/vda2", "/dev/vda"),
               "lsblk --json --inverse -o PATH,TYPE /dev/vdf2": _inverse("/dev/vdf2", "/dev/vdf"),
               "lsblk --json --inverse -o PATH,TYPE /dev/mapper/oldvg-data": _inverse(
                   "/dev/mapper/oldvg-data", "/dev/vda", "/dev/vdf"),
               "pvs --reportformat": json.dumps(SPANNING_PVS)}
    found = problems(planned({"d0": {"name": "/dev/vda", "size": 1 << 30}}), answers=answers)
    assert any(p.startswith("disks[0]: md array /dev/md127 on /dev/vda also stands on /dev/vdf, "
                            "which the plan does not name") for p in found), found
    assert any(p.startswith("disks[0]: volume group oldvg on /dev/vda also stands on /dev/vdf")
               for p in found), found
    assert not any("elsewhere" in p or "vdg" in p for p in found)
    # the same machine with vdf named too: both are cleared with the disks they stand on
    live = LIVE + [{"name": "/dev/vdf", "size": 1 << 30}]
    r = FakeRunner(dict(answers, **{"lsblk --json --bytes": json.dumps(
        {"blockdevices": SPANNING_TREE["blockdevices"] + [
            {"name": "vdf", "path": "/dev/vdf", "type": "disk", "children": []}]})}))
    preflight.check(planned({"d0": {"name": "/dev/vda", "size": 1 << 30},
                             "d1": {"name": "/dev/vdf", "size": 1 << 30}}), live, r,
                    mounted={}, swaps=[])
    assert r.writes() == []


def test_preflight_refuses_a_gpt_target_without_bios_grub_when_auto_finds_a_bios_machine(
        monkeypatch):
    """boot_mode auto is only known in the ramdisk: on a BIOS machine each grub target on a
    GPT table needs its bios_grub partition, as validation asks of boot_mode bios (issue 56);
    grub-install would fail there after the disks were written. UEFI runs."""
    from provision_agent.data_drivers.native import NativeDriver
    from provision_agent.drivers import bootloader
    from provision_agent.plan import pipeline
    from tests.unit.plan.test_boot_targets import DISKS, raid_boot
    doc = raid_boot(1, 2, mode="auto")
    plan = pipeline.build_plan(NativeDriver(doc).layout(), DISKS)
    live = [{"name": d["name"], "size": d["size"]} for d in DISKS]
    monkeypatch.setattr(bootloader, "boot_mode", lambda wanted: "bios")
    assert problems(plan, live=live) == [
        "bootloader: this machine booted the ramdisk in BIOS mode (the layout says boot_mode "
        "auto), and /dev/vdb has a gpt table without a bios_grub partition, where grub's BIOS "
        "boot code goes: add one to that disk, boot the machine in UEFI mode, or name the "
        "disks that boot in targets"]
    monkeypatch.setattr(bootloader, "boot_mode", lambda wanted: "uefi")
    assert not any("bios_grub" in p for p in problems(plan, live=live))    # UEFI's own below


def test_auto_on_a_uefi_machine_checks_the_targets_boot_mode_uefi_would(monkeypatch):
    """boot_mode auto found a UEFI machine: the targets are the ones boot_mode uefi plans and
    are checked as validation checks those (issue 56). curtin's raid-partition-to-disk boots
    from its ESP's disk; the array's members, which have no ESP, are BIOS's targets only. A
    layout with no ESP is refused before the first write: grub-install --target=x86_64-efi
    would fail after it."""
    from provision_agent.data_drivers.native import NativeDriver
    from provision_agent.drivers import bootloader
    from provision_agent.plan import pipeline
    from tests.unit.plan.test_boot_targets import DISKS, raid_boot, raid_partition_to_disk
    live = [{"name": d["name"], "size": d["size"]} for d in DISKS]

    def plan(doc):
        return pipeline.build_plan(NativeDriver(doc).layout(), DISKS)
    monkeypatch.setattr(bootloader, "boot_mode", lambda wanted: "uefi")
    step = next(s for s in plan(raid_partition_to_disk("auto")).steps if s.kind == "bootloader")
    assert bootloader.targets_for(step.args, "uefi") == ["/dev/vdc"]
    preflight.check(plan(raid_partition_to_disk("auto")), live,
                    FakeRunner({"lsblk --json": json.dumps({"blockdevices": []})}),
                    mounted={}, swaps=[])
    said = "bootloader: this machine booted the ramdisk in UEFI mode (the layout says " \
           "boot_mode auto), and "
    assert problems(plan(raid_boot(1, 2, mode="auto")), live=live) == [
        f"{said}/dev/vda has no esp partition, where UEFI firmware finds grub: add one to "
        "that disk, or name the disks that boot in targets",
        f"{said}/dev/vdb has no esp partition, where UEFI firmware finds grub: add one to "
        "that disk, or name the disks that boot in targets",
        f"{said}no vfat filesystem is mounted at /boot/efi, where grub-install puts its EFI "
        "loader: add an esp partition with one"]
    monkeypatch.setattr(bootloader, "boot_mode", lambda wanted: "bios")
    assert bootloader.targets_for(step.args, "bios") == ["/dev/vdc", "/dev/vda", "/dev/vdb"]


def test_an_imsm_volume_is_stopped_before_its_container(monkeypatch):
    # lsblk as the ramdisk printed it for a disk in an IMSM container (mdadm, IMSM_NO_PLATFORM):
    # the volume md126 and its container md127 both sit on the disk, the volume listed first;
    # mdadm refuses to stop a container while a volume in it runs ("member md126 still
    # active"), which failed tests/e2e/test_leftovers.py's wipe of /dev/vda
    tree = {"blockdevices": [{
        "name": "vda", "path": "/dev/vda", "type": "disk", "fstype": "isw_raid_member",
        "children": [{"name": "md126", "path": "/dev/md126", "type": "raid1", "fstype": None},
                     {"name": "md127", "path": "/dev/md127", "type": "md", "fstype": None}]}]}
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    r = FakeRunner({"lsblk --json": json.dumps(tree)})
    wipe.wipe(r, "/dev/vda")
    assert r.writes()[:2] == ["mdadm --stop /dev/md126", "mdadm --stop /dev/md127"]
    assert "wipefs --all --force /dev/vda" in r.writes()


@pytest.mark.parametrize("keep", [[], [3]])
def test_the_old_partitions_edges_are_zeroed_where_zfs_keeps_its_labels(monkeypatch, keep):
    # wipefs leaves three of a ZFS label's uberblocks and all of its config
    # (tests/functional/test_stale_signatures_loop.py); the msdos extended partition (1 KiB:
    # its EBR chains the logical partitions) and a kept partition are never zeroed
    parts = [("vda1", 512 << 20, "zfs_member"), ("vda2", 1024, None),
             ("vda3", 64 << 20, "ext4"), ("vda5", 256 << 20, "zfs_member")]
    tree = {"blockdevices": [{"name": "vda", "path": "/dev/vda", "type": "disk", "children": [
        {"name": n, "path": f"/dev/{n}", "type": "part", "fstype": f, "size": size}
        for n, size, f in parts]}]}
    zeroed = []
    monkeypatch.setattr(wipe, "zero_edges", zeroed.append)
    wipe.wipe(FakeRunner({"lsblk --json": json.dumps(tree)}), "/dev/vda", keep=keep)
    assert zeroed == ["/dev/vda1"] + ([] if keep else ["/dev/vda3"]) + ["/dev/vda5"] \
        + ([] if keep else ["/dev/vda"])


def test_an_old_bios_grub_partition_is_zeroed_whole_beside_a_kept_one(monkeypatch):
    """Issue 57: with a kept partition the disk's boot code stays, and the old 1 MiB bios_grub
    was never zeroed (only partitions of two edges or more were): the earlier install's grub
    core would boot a grub.cfg the new image brings after a power cut before the bootloader."""
    parts = [("vda1", 1 << 20, None), ("vda2", 1536 << 20, "ext4"), ("vda3", 1 << 30, "ext4")]
    tree = {"blockdevices": [{"name": "vda", "path": "/dev/vda", "type": "disk", "children": [
        {"name": n, "path": f"/dev/{n}", "type": "part", "fstype": f, "size": size}
        for n, size, f in parts]}]}
    zeroed = []
    monkeypatch.setattr(wipe, "zero_edges", zeroed.append)
    wipe.wipe(FakeRunner({"lsblk --json": json.dumps(tree)}), "/dev/vda", keep=[3])
    assert zeroed == ["/dev/vda1", "/dev/vda2"]


def test_the_partitions_of_an_array_on_a_kept_member_are_not_the_disks_to_clear(monkeypatch):
    # lsblk under /dev/vda with partition 2 kept: the kept array on it and that array's own
    # partition table (curtin's partition-existing-raid); md127p1 was taken for the disk's
    # partition 1 and handed to wipefs (tests/e2e/test_keep.py -k partition_table: "wipefs
    # --all --force /dev/vda1 /dev/md127p1" exited 1, the array being stopped by then)
    tree = {"blockdevices": [{"name": "vda", "path": "/dev/vda", "type": "disk", "children": [
        {"name": "vda1", "path": "/dev/vda1", "type": "part", "fstype": "ext4",
         "size": 512 << 20},
        {"name": "vda2", "path": "/dev/vda2", "type": "part", "fstype": "linux_raid_member",
         "size": 768 << 20, "children": [
             {"name": "md127", "path": "/dev/md127", "type": "raid1", "children": [
                 {"name": f"md127p{n}", "path": f"/dev/md127p{n}", "type": "part",
                  "fstype": "ext4", "size": 256 << 20} for n in (1, 2)]}]}]}]}
    zeroed = []
    monkeypatch.setattr(wipe, "zero_edges", zeroed.append)
    r = FakeRunner({"lsblk --json": json.dumps(tree)})
    wipe.wipe(r, "/dev/vda", keep=[2])
    assert r.writes() == ["mdadm --stop /dev/md127", "wipefs --all --force /dev/vda1"]
    assert zeroed == ["/dev/vda1"]


def test_old_partitions_edges_are_zeroed_before_the_disks_wipefs_drops_them(monkeypatch):
    """wipefs erasing the disk's table has the kernel re-read it, and the old partitions'
    nodes go: a partition zeroed after it failed with FileNotFoundError ('/dev/vda1', exit 1)
    in the VM (e2e-faults' outage case, 2026-11-29)."""
    sized = {"blockdevices": [dict(TREE["blockdevices"][0], children=[
        {"name": "vda1", "path": "/dev/vda1", "type": "part", "fstype": "ext4",
         "size": 64 << 20}])]}
    r = FakeRunner({"lsblk --json": json.dumps(sized), "pvs --reportformat": json.dumps(PVS)})
    seen = []
    monkeypatch.setattr(wipe, "zero_edges", lambda d: seen.append((d, list(r.writes()))))
    wipe.wipe(r, "/dev/vda")
    assert seen[0][0] == "/dev/vda1"
    assert not any(w.startswith("wipefs") and w.endswith("/dev/vda") for w in seen[0][1])
    assert "wipefs --all --force /dev/vda1 /dev/vda" in r.writes()
