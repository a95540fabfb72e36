"""`provision erase` (Ironic's cleaning): which disks are erased and which are left alone, with
a scripted runner; the real erase of real disks is proven in the Ironic VM cycle."""

import json

import pytest

from provision_agent.cli import main as cli
from provision_agent.drivers import wipe
from provision_agent.errors import CommandError, InputError
from provision_agent.run import erase
from provision_agent.run.events import Events
from provision_agent.run.runner import Result
from tests.unit.fakes import FakeRunner

DISKS = [
    {"name": "/dev/vda", "size": 4 << 30, "serial": "disk0"},
    {"name": "/dev/vdb", "size": 4 << 30, "serial": "disk1", "read_only": True},
    {"name": "/dev/sdc", "size": 8 << 30, "serial": "usb", "removable": True},
    {"name": "/dev/vdd", "size": 4 << 30, "serial": "keepme"},
    {"name": "/dev/vde", "size": 4 << 30, "serial": "disk4"},
    {"name": "/dev/sr0", "size": 1 << 20, "serial": "vmedia"},
]
TREES = {
    "/dev/vda": {"path": "/dev/vda", "type": "disk", "children": [
        {"path": "/dev/vda1", "type": "part", "fstype": "ext4"}]},
    "/dev/vde": {"path": "/dev/vde", "type": "disk", "children": [
        {"path": "/dev/vde1", "type": "part", "fstype": "ext4"}]},
    "/dev/sr0": {"path": "/dev/sr0", "type": "rom", "label": "VMEDIA_BOOT_ISO"},
}


class DiskRunner(FakeRunner):
    """lsblk answers with the tree of the device asked for."""

    def run(self, argv, check=True, timeout=None, input=None, ok_codes=(0,)):
        if argv[0] == "lsblk":
            self.calls.append([str(a) for a in argv])
            tree = TREES.get(argv[-1], {"path": argv[-1], "type": "disk"})
            return Result(tuple(argv), 0, json.dumps({"blockdevices": [tree]}), "", 0.0)
        return super().run(argv, check=check, timeout=timeout, input=input, ok_codes=ok_codes)


def runner(**kw):
    return DiskRunner({"pvs --reportformat": json.dumps({"report": [{"pv": []}]})}, **kw)


def test_what_is_erased_and_what_is_left_alone_and_why():
    chosen, skipped = erase.choose(DISKS, [{"serial": "keepme"}], runner(),
                                   mounted={"/dev/vde1": "/run/media"}, swaps=[])
    assert chosen == ["/dev/vda"]
    assert dict(skipped) == {
        "/dev/vdb": "read-only",
        "/dev/sdc": "removable (a USB stick, a card, virtual media)",
        "/dev/vdd": "skip_block_devices[0] matches it",
        "/dev/vde": "in use: /dev/vde1 is mounted at /run/media",
        "/dev/sr0": "in use: /dev/sr0 is labelled VMEDIA_BOOT_ISO: the medium a ramdisk "
                    "boots from",
    }


def test_erase_wipes_only_the_chosen_disks_and_reports_each(monkeypatch, tmp_path):
    zeroed = []
    monkeypatch.setattr(wipe, "zero_edges", zeroed.append)
    r = runner()
    events_file = tmp_path / "events.jsonl"
    events = Events([open(events_file, "w")])
    report = erase.erase({"skip_block_devices": [{"serial": "keepme"}]}, r, events,
                         disks=DISKS, mounted={}, swaps=[])
    events.close()
    assert report["erased"] == ["/dev/vda", "/dev/vde"]
    writes = r.writes()
    assert "wipefs --all --force /dev/vda1 /dev/vda" in writes
    assert "sgdisk --zap-all /dev/vde" in writes
    touched = {w.split()[-1].rstrip("0123456789") for w in writes}
    assert touched == {"/dev/vda", "/dev/vde"}, writes
    assert zeroed == ["/dev/vda", "/dev/vde"]
    steps = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert [(e["index"], e["status"]) for e in steps] == [(1, "start"), (1, "done"),
                                                          (2, "start"), (2, "done")]


def _encrypted_tree(disk):
    """RAID1 member -> array -> LUKS -> LVM, and a second partition that is LUKS itself."""
    lv = {"path": "/dev/mapper/os-root", "type": "lvm", "fstype": "ext4"}
    crypt = {"path": "/dev/mapper/cryptos", "type": "crypt", "fstype": "LVM2_member",
             "children": [lv]}
    md = {"path": "/dev/md127", "type": "raid1", "fstype": "crypto_LUKS", "children": [crypt]}
    return {"path": disk, "type": "disk", "children": [
        {"path": disk + "1", "type": "part", "fstype": "linux_raid_member", "children": [md]},
        {"path": disk + "2", "type": "part", "fstype": "crypto_LUKS"}]}


def _array_on(*disks):
    """lsblk --inverse's answer for /dev/md127: the disks it stands on."""
    return {"path": "/dev/md127", "type": "raid1", "children": [
        {"path": d + "3", "type": "part", "children": [{"path": d, "type": "disk"}]}
        for d in disks]}


def test_erase_destroys_every_luks_keyslot_while_the_arrays_still_stand(monkeypatch):
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    monkeypatch.setitem(TREES, "/dev/vdf", _encrypted_tree("/dev/vdf"))
    monkeypatch.setitem(TREES, "/dev/md127", _array_on("/dev/vdf"))
    r = runner()
    erase.erase({}, r, Events([]), disks=[{"name": "/dev/vdf", "size": 4 << 30}],
                mounted={}, swaps=[])
    writes = r.writes()
    erased = [w for w in writes if w.startswith("cryptsetup erase")]
    assert erased == ["cryptsetup erase --batch-mode /dev/md127",
                      "cryptsetup erase --batch-mode /dev/vdf2"]
    first = writes.index(erased[0])
    assert first < writes.index("wipefs --all --force /dev/md127") \
        < writes.index("mdadm --stop /dev/md127")
    assert first < next(i for i, w in enumerate(writes) if w.startswith("wipefs"))


def test_luks_on_an_array_that_also_stands_on_a_disk_left_alone_keeps_its_keyslots(
        monkeypatch, caplog):
    """The keyslots are mirrored onto every member: erasing them would write to the disk
    that skip_block_devices protects."""
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    monkeypatch.setitem(TREES, "/dev/vdf", _encrypted_tree("/dev/vdf"))
    monkeypatch.setitem(TREES, "/dev/md127", _array_on("/dev/vdf", "/dev/vdd"))
    r = runner()
    erase.erase({"skip_block_devices": [{"serial": "keepme"}]}, r, Events([]),
                disks=DISKS[3:4] + [{"name": "/dev/vdf", "size": 4 << 30}],
                mounted={}, swaps=[])
    assert [w for w in r.writes() if w.startswith("cryptsetup")] == [
        "cryptsetup erase --batch-mode /dev/vdf2"]
    assert "also stands on /dev/vdd, which is not being cleared" in caplog.text


def test_a_wipe_that_keeps_a_partition_leaves_the_luks_volumes_on_it(monkeypatch):
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    monkeypatch.setitem(TREES, "/dev/vdf", _encrypted_tree("/dev/vdf"))
    r = runner()
    wipe.wipe(r, "/dev/vdf", keep={1})
    assert [w for w in r.writes() if w.startswith("cryptsetup")] == [
        "cryptsetup erase --batch-mode /dev/vdf2"]


def test_volume_groups_on_erased_disks_alone_are_activated_to_reach_luks_on_their_lvs(
        monkeypatch):
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    pvs = [{"pv_name": "/dev/vda", "vg_name": "tenant"},
           {"pv_name": "/dev/vdd", "vg_name": "kept"},
           {"pv_name": "/dev/vde", "vg_name": "spans"}, {"pv_name": "/dev/vdd", "vg_name": "spans"}]
    r = DiskRunner({"pvs --reportformat": json.dumps({"report": [{"pv": pvs}]})})
    erase.erase({"skip_block_devices": [{"serial": "keepme"}]}, r, Events([]),
                disks=DISKS, mounted={}, swaps=[])
    activated = [c for c in r.lines() if c.startswith("vgchange --activate y")]
    assert activated == ["vgchange --activate y tenant"]
    lines = r.lines()
    assert lines.index(activated[0]) < lines.index("wipefs --all --force /dev/vda1 /dev/vda")


def test_a_disk_that_cannot_be_erased_fails_after_the_others(monkeypatch):
    monkeypatch.setattr(wipe, "zero_edges", lambda d: None)
    r = runner(fail=("sgdisk --zap-all /dev/vda",))
    with pytest.raises(CommandError):
        erase.erase(None, r, Events(), disks=DISKS[:1] + DISKS[4:5], mounted={}, swaps=[])
    assert "sgdisk --zap-all /dev/vde" in r.writes()


@pytest.mark.parametrize("document", [
    {"skip_block_devices": "vda"}, {"skip_block_devices": [{}]}, {"layout": 1}, [],
    {"skip_block_devices": [{"size": 1}] * 65},
])
def test_a_malformed_skip_list_is_invalid_input(document):
    with pytest.raises(InputError):
        erase.skip_hints(document)


def test_erase_refuses_a_recorded_inventory(capsys):
    assert cli.main(["erase", "--inventory_file", "inv.json"]) == 2
    assert "'erase' works on this machine's own disks" in capsys.readouterr().err
