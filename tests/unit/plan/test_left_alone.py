"""Devices that are not install targets (a USB stick, virtual media, a read-only disk) are
never chosen by a rule (size, model, rotational) nor by default; hints that name one do."""

import pytest

from provision_agent.errors import MachineMismatch
from provision_agent.plan import inventory, pipeline
from tests.unit.helpers import mutate, sample

# what `provision inventory` printed in the VM bench: a SAS disk, a USB stick that does not flag
# itself removable (qemu's usb-storage, many USB hard disks), a card reader's card, and a
# disk the controller exports read-only; all the same model
DISKS = inventory.from_document({"disks": [
    {"name": "/dev/sda", "size": 8 << 30, "serial": "PA-SAS", "model": "QEMU HARDDISK",
     "tran": "sas"},
    {"name": "/dev/sdb", "size": 8 << 30, "serial": "PA-USB", "model": "QEMU HARDDISK",
     "tran": "usb"},
    {"name": "/dev/sdc", "size": 8 << 30, "serial": "PA-CARD", "model": "QEMU HARDDISK",
     "removable": True},
    {"name": "/dev/vda", "size": 8 << 30, "serial": "PA-RO", "model": "QEMU HARDDISK",
     "read_only": True}]})


def plan(match, disks=DISKS):
    doc = mutate(sample("single-disk"), lambda d: d["disks"][0].update(match=match))
    planned = pipeline.build_plan(pipeline.load_layout(doc), disks)
    return planned.resolved.devices["disk0"], planned.resolved.matched_by["disk0"]


@pytest.mark.parametrize("rule", [{"size": ">= 4"}, {"model": "QEMU HARDDISK"},
                                  {"size": ">= 4", "model": "QEMU HARDDISK"}])
def test_a_rule_never_matches_a_disk_no_program_picks_by_itself(rule):
    """Before: "4 disks match ...; add a hint so exactly one does" (exit 3)."""
    name, why = plan(rule)
    assert name == "/dev/sda"
    assert "left out: /dev/sdb removable" in why and "/dev/sdc removable" in why
    assert "/dev/vda read-only" in why


def test_a_rule_that_finds_only_such_disks_is_refused_naming_them():
    with pytest.raises(MachineMismatch) as exc:
        plan({"size": ">= 4"}, [d for d in DISKS if d["name"] != "/dev/sda"])
    text = str(exc.value.problems[0])
    assert "no program picks by itself" in text and "/dev/sdb removable" in text


@pytest.mark.parametrize("hints, disk", [({"serial": "PA-USB"}, "/dev/sdb"),
                                         ({"name": "/dev/sdc"}, "/dev/sdc")])
def test_hints_that_name_a_removable_disk_still_find_it(hints, disk):
    assert plan(hints)[0] == disk
