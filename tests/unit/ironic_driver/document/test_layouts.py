"""Where a deploy's layout comes from (ironic_driver/document/layouts.py), on Ironic's DB fixtures:
the four sources and their order, named layouts, the set_layout deploy step run by Ironic's
own deploy-step machinery from a deploy template, and validate planning the chosen layout
against the node's stored inventory."""

import copy
import json
import os
from unittest import mock

from ironic.common import exception, states
from ironic.conductor import deployments, manager, task_manager
from ironic.conductor import steps as conductor_steps
from ironic.tests.unit.db import utils as db_utils
from ironic.tests.unit.objects import utils as obj_utils

from ironic_driver import deploy
from ironic_driver.document import layouts, sent
from tests import REPO_ROOT
from tests.unit.ironic_driver import dbcase

ROOT = REPO_ROOT
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"
TRAIT = "CUSTOM_RAID1_LVM"


def _sample(name):
    with open(os.path.join(ROOT, "samples", name)) as f:
        return json.load(f)


def _marked(layout, mark):
    """A copy of a layout whose root filesystem label says where it came from."""
    layout = copy.deepcopy(layout)
    root = next(f for f in layout["filesystems"] if f.get("mount") == "/")
    root["label"] = mark
    return layout


def _mark(payload):
    root = next(f for f in payload["layout"]["filesystems"] if f.get("mount") == "/")
    return root["label"]


SINGLE = _sample("single-disk.json")
TWO_DISKS = _sample("two-disk-raid-lvm.json")
INVENTORY = _sample(os.path.join("inventory", "single-disk.json"))


class LayoutCase(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(__import__("fixtures").TempDir()).path
        self.config(layouts_dir=self.dir, group="provision_agent")
        for name, layout in {"node-default": _marked(SINGLE, "node-default"),
                             "from-template": _marked(SINGLE, "from-template"),
                             "two-disks": TWO_DISKS}.items():
            with open(os.path.join(self.dir, name + ".json"), "w") as f:
                json.dump(layout, f)
        self.node = obj_utils.create_test_node(
            self.context, driver="fake-hardware", deploy_interface="provision",
            network_interface="noop",
            driver_info={"provision_ssh_address": "192.0.2.10", "provision_host_key": HOST_KEY},
            instance_info={"image_source": "http://x/img", "image_checksum": "0" * 64,
                           "root_gb": 3})

    def _set(self, instance=None, driver=None, traits=None):
        info = dict(self.node.instance_info)
        if instance is not None:
            info["provision_layout"] = instance
        if traits:
            info["traits"] = traits
            db_utils.create_test_node_traits(traits, node_id=self.node.id)
        self.node.instance_info = info
        if driver is not None:
            self.node.driver_info = dict(self.node.driver_info, provision_layout=driver)
        self.node.save()

    def _template(self, layout, priority=150, name=TRAIT):
        obj_utils.create_test_deploy_template(
            self.context, name=name, steps=[{"interface": "deploy", "step": layouts.STEP,
                                             "args": {"layout": layout},
                                             "priority": priority}])

    def _deploy_with_step(self, layout):
        """Ironic's own deploy, with set_layout given in the deploy request."""
        self.node.provision_state = states.DEPLOYING
        self.node.target_provision_state = states.ACTIVE
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            deployments.do_node_deploy(task, deploy_steps=[{
                "interface": "deploy", "step": layouts.STEP, "priority": 150,
                "args": {"layout": layout}}])
        self.node.refresh()

    def _chosen_at_validate(self):
        with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
            step = layouts.template_step(task)
            return layouts.choose(task.node, step), sent.payload(task.node, "ironic",
                                                                       step)


class TestPrecedence(LayoutCase):
    def test_instance_info_wins_over_template_and_node_default(self):
        self._set(instance=_marked(SINGLE, "instance"), driver="node-default", traits=[TRAIT])
        self._template("from-template")
        choice, payload = self._chosen_at_validate()
        self.assertEqual("instance_info/provision_layout", choice.source)
        self.assertEqual("instance", _mark(payload))

    def test_template_step_wins_over_node_default(self):
        self._set(driver="node-default", traits=[TRAIT])
        self._template("from-template")
        choice, payload = self._chosen_at_validate()
        self.assertIn(f"deploy template {TRAIT}", choice.source)
        self.assertEqual("from-template", choice.name)
        self.assertEqual("from-template", _mark(payload))

    def test_a_template_the_instance_did_not_ask_for_is_ignored(self):
        self._set(driver="node-default")
        self._template("from-template")          # no instance trait matches it
        choice, payload = self._chosen_at_validate()
        self.assertEqual("driver_info/provision_layout", choice.source)
        self.assertEqual("node-default", _mark(payload))

    def test_node_default_inline_json_text(self):
        # `baremetal node set --driver-info provision_layout='{...}'` may store the text.
        self._set(driver=json.dumps(_marked(SINGLE, "inline-default")))
        choice, payload = self._chosen_at_validate()
        self.assertIsNone(choice.name)
        self.assertEqual("inline-default", _mark(payload))

    def test_nothing_given_is_ironics_classic_layout(self):
        self.node.instance_info = dict(self.node.instance_info, kernel="k", ramdisk="r")
        self.node.save()
        choice, payload = self._chosen_at_validate()
        self.assertEqual("classic", choice.source)
        self.assertNotIn("layout", payload)
        from provision_agent.plan import pipeline
        layout = pipeline.load_layout(payload, "ironic")
        # Ironic 39 boots an instance with no boot mode set in UEFI: an ESP comes first
        self.assertEqual(["efi-part", "root"], [p.id for p in layout.disks[0].partitions])

    def test_recorded_step_wins_over_node_default_and_loses_to_instance(self):
        self._set(driver="node-default")
        layouts.record_step(self.node, "from-template")
        self.assertEqual("from-template", _mark(sent.payload(self.node, "ironic")))
        self._set(instance="two-disks")
        self.assertEqual(TWO_DISKS["disks"], sent.payload(self.node, "native")["disks"])

    def test_template_step_priority_must_come_before_the_deploy_step(self):
        self._set(traits=[TRAIT])
        self._template("from-template", priority=layouts.DEPLOY_STEP_PRIORITY)
        with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
            exc = self.assertRaises(exception.InvalidParameterValue, layouts.template_step, task)
        self.assertIn(f"deploy template {TRAIT}", str(exc))
        self.assertIn("priority above 100", str(exc))

    def test_disabled_template_step_is_not_a_source(self):
        self._set(traits=[TRAIT])
        self._template("from-template", priority=0)
        choice, _ = self._chosen_at_validate()
        self.assertEqual("classic", choice.source)

    def test_deploy_step_priority_constant_matches_the_interface(self):
        self.assertEqual(layouts.DEPLOY_STEP_PRIORITY,
                         deploy.ProvisionDeploy.deploy._deploy_step_priority)
        self.assertEqual(0, deploy.ProvisionDeploy.set_layout._deploy_step_priority)


class TestNames(LayoutCase):
    def test_bad_names_are_refused_before_any_file_is_opened(self):
        os.symlink("/etc/hostname", os.path.join(self.dir, "outside.json"))
        for name in ("../etc/passwd", "a/b", ".hidden", "-x", "x" * 65, "a b", "outside"):
            exc = self.assertRaises(exception.InvalidParameterValue, layouts.resolve, name,
                                    "driver_info/provision_layout")
            self.assertIn("driver_info/provision_layout", str(exc))

    def test_unknown_name_lists_the_known_ones(self):
        exc = self.assertRaises(exception.InvalidParameterValue, layouts.resolve, "raid9",
                                "driver_info/provision_layout")
        self.assertIn("no layout named 'raid9'", str(exc))
        self.assertIn("from-template, node-default, two-disks", str(exc))

    def test_names_need_a_layouts_dir(self):
        self.config(layouts_dir=None, group="provision_agent")
        exc = self.assertRaises(exception.InvalidParameterValue, layouts.resolve,
                                "node-default", "x")
        self.assertIn("layouts_dir is not set", str(exc))

    def test_a_name_resolves_to_the_files_layout(self):
        self.assertEqual(("two-disks", TWO_DISKS),
                         layouts.resolve("two-disks", "driver_info/provision_layout"))

    def test_not_a_layout_nor_a_name(self):
        for value in (7, ["x"], "{broken"):
            self.assertRaises(exception.InvalidParameterValue, layouts.resolve, value, "w")


class TestDeployStepsRunByIronic(LayoutCase):
    """Ironic's own deploy machinery runs set_layout from the template, before deploy."""

    def test_template_step_runs_before_deploy_and_the_ramdisk_gets_its_layout(self):
        self._set(driver="node-default", traits=[TRAIT])
        self._template("from-template")
        # A layout recorded by an earlier deploy must not leak into this one.
        self.node.set_driver_internal_info(layouts.STEP_KEY, {
            "source": "stale", "name": None, "layout": _marked(SINGLE, "stale")})
        self.node.provision_state = states.DEPLOYING
        self.node.target_provision_state = states.ACTIVE
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            deployments.do_node_deploy(task)
            steps = [s["step"] for s in task.node.driver_internal_info["deploy_steps"]]
        self.assertLess(steps.index(layouts.STEP), steps.index("deploy"), steps)
        self.node.refresh()
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)
        info = self.node.driver_internal_info
        self.assertEqual("wait_ramdisk", info["provision_phase"])
        self.assertEqual("from-template", info[layouts.STEP_KEY]["name"])
        self.assertEqual("from-template", _mark(sent.payload(self.node, "ironic")))

    def test_deploy_steps_given_with_the_deploy_request_choose_the_layout_too(self):
        self._set(driver="node-default")
        self._deploy_with_step("from-template")
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)
        self.assertEqual("from-template", _mark(sent.payload(self.node, "ironic")))

    def test_a_step_run_after_the_deploy_step_fails_instead_of_being_ignored(self):
        # `baremetal node deploy --deploy-steps` with a low priority: validate never saw it.
        self.node.set_driver_internal_info("deploy_steps", [
            {"interface": "deploy", "step": "deploy", "priority": 100, "args": {}},
            {"interface": "deploy", "step": layouts.STEP, "priority": 90,
             "args": {"layout": "from-template"}}])
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InstanceDeployFailure,
                                    task.driver.deploy.set_layout, task, "from-template")
        self.assertIn("priority 90, after the deploy step", str(exc))
        self.node.refresh()
        self.assertNotIn(layouts.STEP_KEY, self.node.driver_internal_info)

    def test_prepare_forgets_an_earlier_deploys_step_layout(self):
        layouts.record_step(self.node, "from-template")
        self.node.provision_state = states.DEPLOYING
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.prepare(task)
            self.assertNotIn(layouts.STEP_KEY, task.node.driver_internal_info)

    def test_ironic_refuses_a_template_step_without_its_layout(self):
        self._set(traits=[TRAIT])
        obj_utils.create_test_deploy_template(
            self.context, name=TRAIT, steps=[{"interface": "deploy", "step": layouts.STEP,
                                              "args": {}, "priority": 150}])
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    conductor_steps.validate_user_deploy_steps_and_templates,
                                    task)
        self.assertIn("missing these required arguments: layout", str(exc))


class TestStepRecordKeepsNoSecrets(LayoutCase):
    """driver_internal_info outlives the deploy and the API shows it unmasked: what the
    set_layout step keeps there names where the layout came from, never its content."""

    SECRET_URL = "https://swift.example/v1/AUTH_x/img?temp_url_sig=s3cr3t&temp_url_expires=9"

    def _secret_layout(self):
        layout = _marked(SINGLE, "inline-secret")
        layout["images"] = [{"uri": self.SECRET_URL, "format": "raw", "target": "root",
                             "checksum": "sha256:" + "0" * 64}]
        layout["configdrive"] = {"content": "c2VjcmV0IHVzZXIgZGF0YQ=="}
        return layout

    def test_an_inline_layout_is_read_from_the_deploy_steps_and_dropped_at_tear_down(self):
        # an operator who lets layouts choose images, with a credentialed image URL
        self.config(layout_images=True, group="provision_agent")
        layout = self._secret_layout()
        self._set(driver="node-default")
        self._deploy_with_step(layout)
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)
        record = self.node.driver_internal_info[layouts.STEP_KEY]
        self.assertEqual({"source", "name", "sha256"}, set(record))
        self.assertNotIn("temp_url_sig", json.dumps(record))
        self.assertNotIn("c2VjcmV0", json.dumps(record))
        # what the ramdisk gets is the whole layout, read from Ironic's deploy steps
        self.assertEqual(layout, sent.payload(self.node, "native"))
        # Ironic's own undeploy (which drops its deploy_steps copy), with our clean_up and
        # tear_down inside it; the cleaning it would start next is not run here
        self.node.provision_state = states.DELETING
        self.node.target_provision_state = states.AVAILABLE
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task, \
                mock.patch("ironic.conductor.utils.node_power_action"):
            conductor = mock.Mock()
            conductor._get_steps_for_automated_cleaning.return_value = (None, False)
            manager.ConductorManager._do_node_tear_down(conductor, task, states.ACTIVE)
        self.node.refresh()
        self.assertNotIn(layouts.STEP_KEY, self.node.driver_internal_info)
        self.assertNotIn("temp_url_sig", json.dumps(self.node.driver_internal_info))

    def test_a_named_layout_that_changed_after_the_step_is_refused(self):
        layouts.record_step(self.node, "from-template")
        with open(os.path.join(self.dir, "from-template.json"), "w") as f:
            json.dump(_marked(SINGLE, "edited meanwhile"), f)
        exc = self.assertRaises(exception.InstanceDeployFailure, sent.payload,
                                self.node, "native")
        self.assertIn("changed since the step checked it", str(exc))

    def test_a_step_record_without_its_step_is_refused(self):
        layouts.record_step(self.node, self._secret_layout())
        exc = self.assertRaises(exception.InstanceDeployFailure, sent.payload,
                                self.node, "native")
        self.assertIn("no longer among this deploy's steps", str(exc))


class TestValidateAgainstInventory(LayoutCase):
    def _validate(self):
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
        key = os.path.join(self.dir, "key")
        with open(key, "wb") as f:
            f.write(ed25519.Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption()))
        self.config(ssh_private_key_file=key, data_driver="native", group="provision_agent")
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.validate(task)

    def test_a_template_layout_that_does_not_fit_fails_validate_with_its_location(self):
        db_utils.create_test_inventory(node_id=self.node.id, inventory=INVENTORY)
        self._set(driver="node-default", traits=[TRAIT])
        self._template("two-disks")
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        msg = str(exc)
        self.assertIn("does not fit this node's inspected inventory", msg)
        self.assertIn(f"deploy template {TRAIT}", msg)
        self.assertIn("'two-disks'", msg)
        self.assertIn("$.disks[1]: no disk matches name='/dev/vdb'", msg)

    def test_a_layout_that_fits_passes(self):
        db_utils.create_test_inventory(node_id=self.node.id, inventory=INVENTORY)
        self._set(driver="node-default", traits=[TRAIT])
        self._template("from-template")
        self._validate()

    def test_without_an_inventory_only_the_layout_itself_is_checked(self):
        self._set(driver="two-disks")
        self._validate()
        self._set(driver={"version": 1, "disks": "not a list"})
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate)
        self.assertIn("driver_info/provision_layout", str(exc))



class TestTheDeploysImageWins(LayoutCase):
    """A layout the deployer did not hand in with the deploy (a template's, the node's, a
    named one) must not silently write another image than instance_info/image_source."""

    def _with_images(self, name):
        layout = _marked(SINGLE, name)
        layout["images"] = [{"uri": "http://example.invalid/placeholder.img", "format": "raw",
                             "target": "root", "checksum": "sha256:" + "1" * 64}]
        with open(os.path.join(self.dir, name + ".json"), "w") as f:
            json.dump(layout, f)
        return layout

    def test_a_named_layout_with_its_own_image_is_refused_at_validate(self):
        self._with_images("uefi-sample")
        for source in ("driver", "template"):
            self._set(**({"driver": "uefi-sample"} if source == "driver" else
                         {"traits": [TRAIT]}))
            if source == "template":
                self._template("uefi-sample")
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    self._chosen_at_validate)
            self.assertIn("names its own images", str(exc))
            self.assertIn("instance_info/image_source", str(exc))
            self.assertIn("'uefi-sample'", str(exc))

    def test_the_deploys_own_layout_may_carry_its_image(self):
        layout = self._with_images("inline")
        self._set(instance=layout)
        _choice, payload = self._chosen_at_validate()
        self.assertEqual(layout["images"], payload["layout"]["images"])

    def test_the_operator_may_let_layouts_choose_images(self):
        self.config(layout_images=True, group="provision_agent")
        self._with_images("uefi-sample")
        self._set(driver="uefi-sample")
        _choice, payload = self._chosen_at_validate()
        self.assertEqual("http://example.invalid/placeholder.img",
                         payload["layout"]["images"][0]["uri"])

    def test_a_layout_without_images_gets_the_deploys_image(self):
        self._set(driver="node-default")
        from provision_agent.plan import pipeline
        _choice, payload = self._chosen_at_validate()
        layout = pipeline.load_layout(payload, "ironic")
        self.assertEqual(["http://x/img"], [i.uri for i in layout.images])
