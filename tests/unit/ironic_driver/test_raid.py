"""Ironic's software RAID settings made into a layout (ironic_driver/document/raid_layout.py) and
the `provision` RAID interface on Ironic's DB fixtures: the node's target_raid_config through the
create_configuration clean step, a deploy template's raid.apply_configuration step run by
Ironic's own deploy machinery, and what is refused."""

import json
import os

import pytest
from ironic.common import exception, states
from ironic.conductor import deployments, task_manager
from ironic.tests.unit.db import utils as db_utils
from ironic.tests.unit.objects import utils as obj_utils

from ironic_driver.document import layouts, raid_layout, sent
from tests import REPO_ROOT
from tests.unit.ironic_driver import dbcase

ROOT = REPO_ROOT
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"
with open(os.path.join(ROOT, "samples", "inventory", "three-disks.json")) as _f:
    INVENTORY = json.load(_f)
TWO = [{"serial": "disk0"}, {"serial": "disk1"}]
IPA_EXAMPLE = {"logical_disks": [
    {"size_gb": 1, "raid_level": "1", "controller": "software", "physical_disks": TWO},
    {"size_gb": "MAX", "raid_level": "0", "controller": "software", "physical_disks": TWO}]}
TRAIT = "CUSTOM_SOFTWARE_RAID"


def _build(config=IPA_EXAMPLE, boot_mode="bios", table="gpt", inventory=None, skip=None):
    disks = raid_layout.logical_disks(config, "target_raid_config")
    members = raid_layout.member_hints(disks, inventory, skip, "target_raid_config")
    return raid_layout.build(config, members, boot_mode, table, "ext4", "target_raid_config",
                             raid_layout.from_inventory(disks))


def test_ipas_two_arrays_on_two_disks_with_bios_grub():
    layout = _build()
    assert [d["match"] for d in layout["disks"]] == TWO
    assert [[(p["id"], p["size"], p["type"]) for p in d["partitions"]]
            for d in layout["disks"]] == [
        [("bios0", 1, "bios_grub"), ("md0-0", 1024, "raid"), ("md1-0", "remaining", "raid")],
        [("bios1", 1, "bios_grub"), ("md0-1", 1024, "raid"), ("md1-1", "remaining", "raid")]]
    assert [(r["id"], r["level"], r["members"]) for r in layout["raids"]] == [
        ("md0", 1, ["md0-0", "md0-1"]), ("md1", 0, ["md1-0", "md1-1"])]
    assert layout["filesystems"] == [{"device": "md0", "type": "ext4", "mount": "/",
                                      "origin": "target_raid_config.logical_disks[0]"}]


def test_uefi_mirrors_the_esps_as_ipa_does_since_victoria():
    layout = _build(boot_mode="uefi")
    assert [p["id"] for p in layout["disks"][0]["partitions"]] == ["esp0", "md0-0", "md1-0"]
    esp = layout["raids"][0]
    assert (esp["id"], esp["level"], esp["metadata"]) == ("esp", 1, "1.0")
    assert {"device": "esp", "type": "vfat", "mount": "/boot/efi"}.items() <= \
        layout["filesystems"][0].items()


def test_member_sizes_follow_the_level():
    config = {"logical_disks": [
        {"size_gb": 10, "raid_level": "1", "controller": "software"},
        {"size_gb": 30, "raid_level": "5", "controller": "software"}]}
    layout = _build(config, inventory=INVENTORY["inventory"]["disks"])
    sizes = [p["size"] for p in layout["disks"][0]["partitions"][1:]]
    assert sizes == [10 * 1024, 15 * 1024]      # a mirror member; a third of 3-1 members
    # without physical_disks every inventoried disk, named by its unique serial
    assert [d["match"] for d in layout["disks"]] == [
        {"serial": "disk0"}, {"serial": "disk1"}, {"serial": "disk2"}]


NO_HINTS = {"logical_disks": [{"size_gb": 1, "raid_level": "1", "controller": "software"}]}
# what else an inspected inventory holds (issue 52 item 3): a USB stick as this project's
# inspection describes it, one as ironic-python-agent's does (its transport, no flag), and a
# read-only disk
OTHERS = [
    {"name": "/dev/sdd", "size": 8 << 30, "serial": "stick", "removable": True},
    {"name": "/dev/sde", "size": 8 << 30, "serial": "ipa-stick", "tran": "usb"},
    {"name": "/dev/sdf", "size": 8 << 30, "serial": "locked", "read_only": True}]


def test_every_disk_is_every_disk_an_erase_would_clear():
    inventory = INVENTORY["inventory"]["disks"] + OTHERS
    layout = _build(NO_HINTS, inventory=inventory, skip=[{"serial": "disk2"}])
    assert [d["match"] for d in layout["disks"]] == [{"serial": "disk0"}, {"serial": "disk1"}]
    # picked, not named: the ramdisk refuses any of them that turns out removable
    assert all(d["from_inventory"] for d in layout["disks"])
    assert "from_inventory" not in _build()["disks"][0]        # physical_disks name them
    with pytest.raises(raid_layout.Refused, match="/dev/sdd: removable.*/dev/sdf: read-only"):
        _build(NO_HINTS, inventory=OTHERS)
    with pytest.raises(raid_layout.Refused, match=r"skip_block_devices\[0\]"):
        _build(NO_HINTS, inventory=inventory, skip=[{"size": "bigger"}])


def test_a_picked_member_that_is_removable_here_is_refused_before_writing():
    """An ironic-python-agent inventory may not say a disk is removable; the ramdisk sees it
    does, and a serial the conductor picked is not the operator naming it."""
    from provision_agent.errors import MachineMismatch
    from provision_agent.machine import preflight
    from provision_agent.plan import inventory, pipeline
    from tests.unit.fakes import FakeRunner
    disks = inventory.from_document(INVENTORY)
    doc = {"node_uuid": "n", "boot_mode": "bios", "properties": {},
           "layout": _build(NO_HINTS, inventory=disks[:2]),
           "instance_info": {"image_source": "http://h/root.img", "image_checksum": "0" * 64,
                             "image_disk_format": "raw"}}
    planned = pipeline.build_plan(pipeline.load_layout(doc, "ironic"), disks)
    live = [dict(d, removable=d["name"] == "/dev/vdb") for d in disks]
    tree = {"blockdevices": [{"name": "vdb", "path": "/dev/vdb", "type": "disk"}]}
    r = FakeRunner({"lsblk --json": json.dumps(tree), "pvs --reportformat": "{}"})
    with pytest.raises(MachineMismatch, match="/dev/vdb is removable"):
        preflight.check(planned, live, r, mounted={}, swaps=[])


@pytest.mark.parametrize("change,why", [
    (lambda c: c["logical_disks"][0].update(controller="RAID.Integrated.1-1"),
     "only 'software' RAID"),
    (lambda c: c["logical_disks"].append(dict(c["logical_disks"][1])), "one or two"),
    (lambda c: c["logical_disks"][0].update(raid_level="5"), "must be RAID-1"),
    (lambda c: c["logical_disks"][0].update(size_gb="MAX"), "only for the last"),
    (lambda c: c["logical_disks"][1].update(physical_disks=[{"serial": "disk2"}]),
     "different physical_disks"),
    (lambda c: c["logical_disks"][1].update(raid_level="5"), "needs at least 3 disks"),
    (lambda c: [ld.pop("physical_disks") for ld in c["logical_disks"]],
     "no inspected inventory"),
    (lambda c: c["logical_disks"][1].update(raid_level="50"), "is not one of"),
])
def test_what_cannot_be_built_is_refused_saying_what_to_change(change, why):
    config = json.loads(json.dumps(IPA_EXAMPLE))
    change(config)
    with pytest.raises(raid_layout.Refused, match=why):
        _build(config)


def test_the_layout_plans_arrays_and_root_on_the_first():
    from provision_agent.plan import inventory, pipeline
    doc = {"node_uuid": "n", "boot_mode": "bios", "properties": {}, "layout": _build(),
           "instance_info": {"image_source": "http://h/root.img", "image_checksum": "0" * 64,
                             "image_disk_format": "raw"}}
    planned = pipeline.build_plan(pipeline.load_layout(doc, "ironic"),
                                  inventory.from_document(INVENTORY))
    creates = [s.args for s in planned.steps if s.kind == "md_create"]
    assert [(a["level"], a["members"]) for a in creates] == [
        (1, ["/dev/vda2", "/dev/vdb2"]), (0, ["/dev/vda3", "/dev/vdb3"])]
    image = [s.args for s in planned.steps if s.kind == "write_image"][0]
    assert (image["device"], image["format"]) == (creates[0]["device"], "raw")
    grub = [s.args for s in planned.steps if s.kind == "bootloader"][0]
    assert sorted(grub["targets"]) == ["/dev/vda", "/dev/vdb"]


class RaidCase(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_node(
            raid_interface="provision",
            driver_info={"provision_ssh_address": "192.0.2.10", "provision_host_key": HOST_KEY},
            properties={"capabilities": "boot_mode:bios"},
            instance_info={"image_source": "http://x/img", "image_checksum": "0" * 64})
        db_utils.create_test_inventory(node_id=self.node.id, inventory=INVENTORY)

    def _payload(self):
        return sent.payload(self.node, "ironic")


class TestCleaningSteps(RaidCase):
    def test_create_configuration_makes_the_next_deploys_build_the_arrays(self):
        self.node.target_raid_config = {"logical_disks": [
            {"size_gb": 2, "raid_level": "1", "controller": "software"}]}
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            steps = {s["step"]: s for s in task.driver.raid.get_clean_steps(task)}
            self.assertFalse(steps["create_configuration"]["requires_ramdisk"])
            task.driver.raid.create_configuration(task)
        self.node.refresh()
        self.assertEqual("1", self.node.raid_config["logical_disks"][0]["raid_level"])
        self.assertIn("raid_level:1", self.node.properties["capabilities"])
        layout = self._payload()["layout"]
        self.assertEqual(3, len(layout["disks"]))       # every inventoried disk
        self.assertEqual([1], [r["level"] for r in layout["raids"]])
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.raid.delete_configuration(task)
        self.node.refresh()
        self.assertNotIn("layout", self._payload())     # back to Ironic's classic layout

    def test_create_configuration_leaves_out_what_the_node_skips(self):
        self.node.properties = dict(self.node.properties,
                                    skip_block_devices=[{"name": "/dev/vdc"}])
        self.node.target_raid_config = {"logical_disks": [
            {"size_gb": 2, "raid_level": "1", "controller": "software"}]}
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.raid.create_configuration(task)
            task.node.save()
        self.node.refresh()
        layout = self._payload()["layout"]
        self.assertEqual([{"serial": "disk0"}, {"serial": "disk1"}],
                         [d["match"] for d in layout["disks"]])
        self.assertTrue(all(d["from_inventory"] for d in layout["disks"]))

    def test_hardware_raid_is_refused_at_validate(self):
        self.node.target_raid_config = {"logical_disks": [
            {"size_gb": 100, "raid_level": "1", "controller": "RAID.Integrated.1-1"}]}
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    task.driver.raid.validate, task)
        self.assertIn("only 'software' RAID", str(exc))


class TestDeployTemplate(RaidCase):
    def _template(self, steps):
        obj_utils.create_test_deploy_template(self.context, name=TRAIT, steps=steps)
        db_utils.create_test_node_traits([TRAIT], node_id=self.node.id)
        self.node.instance_info = dict(self.node.instance_info, traits=[TRAIT])
        self.node.save()

    def test_a_flavor_trait_builds_software_raid_through_ironics_deploy_steps(self):
        self._template([{"interface": "raid", "step": "apply_configuration", "priority": 150,
                         "args": {"raid_config": IPA_EXAMPLE}}])
        with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
            where, at_validate = layouts.template_step(task)
        self.assertIn(f"deploy template {TRAIT} (step raid.apply_configuration)", where)
        self.node.provision_state = states.DEPLOYING
        self.node.target_provision_state = states.ACTIVE
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            deployments.do_node_deploy(task)
        self.node.refresh()
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)
        layout = self._payload()["layout"]
        shape = lambda lay: [(r["id"], r["level"], r["members"]) for r in lay["raids"]]  # noqa
        self.assertEqual(shape(at_validate), shape(layout))   # what validate planned
        self.assertEqual([1, 0], [r["level"] for r in layout["raids"]])
        self.assertEqual("deploy step raid.apply_configuration",
                         self.node.driver_internal_info[layouts.STEP_KEY]["source"])

    def test_a_template_that_chooses_the_layout_twice_is_refused(self):
        self._template([
            {"interface": "raid", "step": "apply_configuration", "priority": 150,
             "args": {"raid_config": IPA_EXAMPLE}},
            {"interface": "deploy", "step": "set_layout", "priority": 140,
             "args": {"layout": {"version": 1, "disks": []}}}])
        with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
            exc = self.assertRaises(exception.InvalidParameterValue, layouts.template_step,
                                    task)
        self.assertIn("one deploy takes one of set_layout and raid.apply_configuration",
                      str(exc))
