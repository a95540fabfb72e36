"""Layout fragments (ironic_driver/document/fragments.py): a deploy template's
deploy.add_extensions step adds a step-kind plug-in's section to whatever layout the deploy
gets, here the software RAID another template builds: validated with it before anything
boots, carried by the document the ramdisk gets, planned before the wipe; a section given twice
(two templates, or the layout and a template) and a step that would run too late are refused,
naming where."""

import json
import os
import tempfile

import pytest
from ironic.common import exception, states
from ironic.conductor import deployments, task_manager
from ironic.tests.unit.db import utils as db_utils
from ironic.tests.unit.objects import utils as obj_utils

from ironic_driver import validation
from ironic_driver.document import sent
from provision_agent.errors import InputError
from provision_agent.plan import api, extensions, steps
from tests import REPO_ROOT
from tests.plugins.harness import install_plugins
from tests.unit.ironic_driver import dbcase
from tests.unit.ironic_driver.test_raid import HOST_KEY, INVENTORY, IPA_EXAMPLE

RAID, ACME, ACME2 = "CUSTOM_SOFTWARE_RAID", "CUSTOM_ACME", "CUSTOM_ACME_TOO"
SECTION = {"acme_firmware": {"settings": {"BootMode": "Uefi", "SriovEnable": "Enabled"}}}


def _add(priority=140, section=SECTION):
    return [{"interface": "deploy", "step": "add_extensions", "priority": priority,
             "args": {"extensions": section}}]


class TestFragments(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        # the example vendor package's step kind, installed on the conductor
        self.patch = pytest.MonkeyPatch()
        self.addCleanup(self.patch.undo)
        self.patch.syspath_prepend(os.path.join(REPO_ROOT, "examples", "vendor-plugin"))
        where = tempfile.TemporaryDirectory()
        self.addCleanup(where.cleanup)
        install_plugins(__import__("pathlib").Path(where.name), self.patch,
                        {"acme_firmware": "acme_provision.firmware:FirmwareSettings"},
                        package="acme-provision")
        self.addCleanup(steps.KINDS.pop, "acme_firmware", None)
        self.node = self.make_node(
            raid_interface="provision",
            driver_info={"provision_ssh_address": "192.0.2.10", "provision_host_key": HOST_KEY},
            properties={"capabilities": "boot_mode:bios"},
            instance_info={"image_source": "http://x/img", "image_checksum": "0" * 64})
        db_utils.create_test_inventory(node_id=self.node.id, inventory=INVENTORY)

    def _templates(self, **by_trait):
        for trait, template_steps in by_trait.items():
            obj_utils.create_test_deploy_template(self.context, name=trait,
                                                  steps=template_steps)
        db_utils.create_test_node_traits(list(by_trait), node_id=self.node.id)
        self.node.instance_info = dict(self.node.instance_info, traits=list(by_trait))
        self.node.save()

    def _validate(self):
        """What the deploy interface's validate runs for the instance (validation.py)."""
        with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
            validation.check_instance(task, "ironic")

    def _deploy(self):
        """Validated, then deployed by Ironic's own do_node_deploy; the node read back."""
        self._validate()
        self.node.provision_state = states.DEPLOYING
        self.node.target_provision_state = states.ACTIVE
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            deployments.do_node_deploy(task)
        self.node.refresh()

    def test_a_template_adds_the_vendor_step_to_the_raid_layout_another_one_builds(self):
        self._templates(**{RAID: [{"interface": "raid", "step": "apply_configuration",
                                   "priority": 150, "args": {"raid_config": IPA_EXAMPLE}}],
                           ACME: _add()})
        self._deploy()
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state, self.node.last_error)
        doc = sent.payload(self.node, "ironic")     # what the ramdisk gets
        self.assertEqual(SECTION, doc["extensions"])
        self.assertEqual([1, 0], [r["level"] for r in doc["layout"]["raids"]])
        # the secret-bearing sections stay out of the node's record
        self.assertNotIn("Uefi", json.dumps(self.node.driver_internal_info.get(
            "provision_layout_step")))
        plan = api.build_plan(api.load_layout(json.loads(json.dumps(doc)), "ironic"),
                              INVENTORY["inventory"]["disks"])
        kinds = [s.kind for s in plan.steps]
        self.assertEqual(["acme_firmware", "acme_firmware"], kinds[:2])
        self.assertEqual("ACME firmware: BootMode = Uefi", plan.steps[0].description)
        self.assertEqual(2, kinds.count("md_create"))      # the RAID template's two arrays

    def test_the_classic_layout_gets_the_section_too(self):
        self._templates(**{ACME: _add()})
        self._deploy()
        doc = sent.payload(self.node, "ironic")
        self.assertNotIn("layout", doc)
        layout = api.load_layout(json.loads(json.dumps(doc)), "ironic")
        self.assertEqual(SECTION, layout.extensions)

    def test_two_templates_giving_one_plugins_section_are_refused_naming_both(self):
        self._templates(**{ACME: _add(140), ACME2: _add(130)})
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        self.assertIn(f"deploy template {ACME2} (step deploy.add_extensions): adds the plug-in "
                      f"section 'acme_firmware', which deploy template {ACME} (step "
                      "deploy.add_extensions) already gives", str(exc))

    def test_a_section_the_layout_has_itself_is_never_replaced(self):
        layout = json.load(open(os.path.join(REPO_ROOT, "samples", "single-disk.json")))
        layout["extensions"] = {"acme_firmware": {"settings": {"BootMode": "Legacy"}}}
        self.node.instance_info = dict(self.node.instance_info, provision_layout=layout)
        self.node.save()
        self._templates(**{ACME: _add()})
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        self.assertIn("which instance_info/provision_layout (its extensions) already gives",
                      str(exc))

    def test_a_fragment_that_would_arrive_after_the_document_is_refused(self):
        self._templates(**{ACME: _add(priority=90)})
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        self.assertIn("priority 90 runs after the deploy step (priority 100)", str(exc))

    def test_a_bad_section_is_refused_at_validate_by_the_plugin(self):
        self._templates(**{ACME: _add(section={"acme_firmware": {"settings": {
            "SriovEnable": "yes"}}})})
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        self.assertIn("settings.SriovEnable: ACME firmware takes Enabled or Disabled",
                      str(exc))


def test_the_ironic_data_driver_refuses_a_section_the_layout_has(monkeypatch):
    monkeypatch.setattr(extensions, "_LOADED", {})
    layout = json.load(open(os.path.join(REPO_ROOT, "samples", "single-disk.json")))
    layout["extensions"] = {"acme_firmware": {"settings": {"BootMode": "Legacy"}}}
    doc = {"node_uuid": "x", "instance_info": {"image_source": "http://x/i",
                                               "image_checksum": "0" * 64},
           "layout": layout, "extensions": SECTION}
    with pytest.raises(InputError, match=r"extensions\.acme_firmware: the layout has its own"):
        api.load_layout(doc, "ironic")
