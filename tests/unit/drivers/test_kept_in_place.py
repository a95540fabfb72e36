"""The drivers behind keeping in place (issue 54), with a scripted runner: a kept array is
checked on its members' superblocks and assembled from them (what udev assembled from them
stopped first), a kept device's contents wiped without touching anything else."""

import json

import pytest

from provision_agent.drivers import md, wipe
from provision_agent.errors import MachineMismatch
from provision_agent.machine import preflight
from provision_agent.plan.steps import make as Step
from provision_agent.run import kept_steps
from tests.unit.fakes import FakeRunner

ARGS = {"device": "/dev/md/md1", "name": "md1", "level": 1,
        "members": ["/dev/vda2", "/dev/vdb1"], "spares": []}


def examine(name="md1", level="raid1", devices=2, uuid="aa:bb"):
    return (f"MD_LEVEL={level}\nMD_DEVICES={devices}\nMD_NAME={name}\nMD_UUID={uuid}\n"
            "MD_DEV_UUID=11:22\n")


def test_a_kept_array_as_planned_has_no_problem():
    r = FakeRunner({"mdadm --examine --export": examine("host:md1")})
    assert md.kept_array_problems(r, ARGS) == []
    assert r.writes() == []


@pytest.mark.parametrize("answers, expected", [
    ({"mdadm --examine --export /dev/vda2": (1, ""), "mdadm --examine --export": examine()},
     ["/dev/vda2: no md superblock, so there is no array md1 on it to keep"]),
    ({"mdadm --examine --export /dev/vda2": examine(uuid="cc:dd"),
      "mdadm --examine --export": examine()},
     ["the members of md1 to keep belong to 2 different arrays (aa:bb, cc:dd)"]),
    ({"mdadm --examine --export": examine(name="other", level="raid0", devices=3)},
     ["/dev/vda2 is a member of array other, the layout keeps md1",
      "/dev/vda2: the array is raid0, the layout says raid1",
      "/dev/vda2: the array has 3 devices, the layout lists 2 members: list every one (kept)"]),
])
def test_a_kept_array_not_as_planned_is_refused_saying_what_is_there(answers, expected):
    found = md.kept_array_problems(FakeRunner(answers), ARGS)
    for want in expected:
        assert any(p.startswith(want) for p in found), found


def test_preflight_refuses_a_kept_array_that_is_another_one():
    step = Step("md_assemble", ARGS)
    planned = type("P", (), {"steps": [step], "resolved": type("R", (), {
        "disks": {}, "layout": type("L", (), {"disks": []})()})()})()
    r = FakeRunner({"mdadm --examine --export": examine(name="old"),
                    "lsblk --json": json.dumps({"blockdevices": []})})
    with pytest.raises(MachineMismatch, match="raid md1: /dev/vda2 is a member of array old"):
        preflight.check(planned, [], r, mounted={}, swaps=[])
    assert r.writes() == []


class _Executor:
    def __init__(self, runner):
        self.runner = runner
        self.kept = set()


def test_assemble_stops_what_udev_assembled_from_the_members_then_assembles(monkeypatch):
    tree = {"blockdevices": [
        {"path": "/dev/vda2", "type": "part", "children": [
            {"path": "/dev/md127", "type": "raid1", "children": []}]},
        {"path": "/dev/vdb1", "type": "part", "children": [
            {"path": "/dev/md127", "type": "raid1", "children": []}]}]}
    r = FakeRunner({"mdadm --examine --export": examine(), "lsblk --json": json.dumps(tree)})
    monkeypatch.setattr("provision_agent.drivers.udev.wait_for_devices", lambda *a, **k: None)
    ex = _Executor(r)
    result = kept_steps.handlers(ex)["md_assemble"](Step("md_assemble", ARGS))
    assert r.writes() == ["mdadm --stop /dev/md127",
                          "mdadm --assemble /dev/md/md1 --run /dev/vda2 /dev/vdb1"]
    assert result == {"kept": "/dev/md/md1"} and ex.kept == {"/dev/md/md1"}


def test_assemble_refuses_before_writing_when_the_members_changed():
    r = FakeRunner({"mdadm --examine --export": (1, "")})
    with pytest.raises(MachineMismatch, match="no md superblock"):
        kept_steps.handlers(_Executor(r))["md_assemble"](Step("md_assemble", ARGS))
    assert r.writes() == []


@pytest.mark.parametrize("how, last", [("superblock", None),
                                       ("zero", "blkdiscard --zeroout --force /dev/vda2")])
def test_wipe_contents_takes_down_what_stands_on_it_and_clears_only_it(monkeypatch, how, last):
    tree = {"blockdevices": [{"path": "/dev/vda2", "type": "part", "fstype": "LVM2_member",
                              "children": [{"path": "/dev/mapper/old-srv", "type": "lvm",
                                            "fstype": "xfs", "children": []}]}]}
    pvs = {"report": [{"pv": [{"pv_name": "/dev/vda2", "vg_name": "old"}]}]}
    zeroed = []
    monkeypatch.setattr(wipe, "zero_edges", zeroed.append)
    monkeypatch.setattr("os.path.exists", lambda p: False)
    r = FakeRunner({"lsblk --json --inverse": json.dumps({"blockdevices": []}),
                    "lsblk --json": json.dumps(tree), "pvs --reportformat": json.dumps(pvs)})
    wipe.wipe_contents(r, "/dev/vda2", how)
    writes = r.writes()
    assert writes[:3] == ["vgchange --activate n old",
                          "pvremove --force --force --yes /dev/vda2",
                          "wipefs --all --force /dev/vda2"]
    assert writes[3:] == ([last] if last else [])
    assert zeroed == ([] if last else ["/dev/vda2"])
