"""A layout's "keep": "on_rebuild" through Ironic: kept on a rebuild of the same instance (a
deploy of a node whose disks an earlier deploy of ours wrote, not undeployed since), made anew
on a first deploy, and forgotten at undeploy (before cleaning erases the disks for the next
tenant). On Ironic's DB fixtures, with its own tear down."""

import copy
from unittest import mock

from ironic.common import states
from ironic.conductor import manager, task_manager
from ironic.tests.unit.objects import utils as obj_utils

from ironic_driver.document import contract, rebuild, sent
from tests.unit.ironic_driver import dbcase

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"
INSTANCE = "6e9e4f2a-4c39-4c6a-9a11-4a1e6d1b2c3d"
LAYOUT = {"version": 1,
          "disks": [{"id": "d", "match": {"serial": "s1"}, "partitions": [
              {"id": "bios", "size": "1MiB", "type": "bios_grub"},
              {"id": "root", "size": "4GiB"},
              {"id": "pv", "size": "remaining", "type": "lvm", "keep": "on_rebuild"}]}],
          "volume_groups": [{"id": "vg", "name": "data", "pvs": ["pv"], "keep": "on_rebuild",
                             "logical_volumes": [{"id": "srv", "name": "srv", "size": "1GiB"}]}],
          "filesystems": [{"device": "root", "type": "ext4", "mount": "/"},
                          {"device": "srv", "type": "xfs", "mount": "/srv"}],
          "images": [{"uri": "http://x/img.raw", "target": "root",
                      "checksum": "sha256:" + "a" * 64}],
          "bootloader": {"boot_mode": "bios"}}


class TestKeepOnRebuild(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = obj_utils.create_test_node(
            self.context, driver="fake-hardware", deploy_interface="provision",
            instance_uuid=INSTANCE,
            driver_info={"provision_ssh_address": "192.0.2.10",
                         "provision_host_key": HOST_KEY},
            instance_info={"image_source": "http://x/img", "root_gb": 10,
                           "provision_layout": copy.deepcopy(LAYOUT)},
            properties={"root_device": {"serial": "s1"}, "capabilities": "boot_mode:bios"})

    def kept(self, data_driver="native"):
        doc = sent.payload(self.node, data_driver)
        if data_driver != "native":
            from provision_agent.data_drivers.ironic import IronicDriver
            doc = IronicDriver(doc).native_document()
        return (doc["disks"][0]["partitions"][2]["keep"], doc["volume_groups"][0]["keep"])

    def test_a_first_deploy_makes_anew_what_a_rebuild_keeps(self):
        self.assertFalse(contract.build(self.node)["rebuild"])
        self.assertEqual((False, False), self.kept())
        self.assertEqual((False, False), self.kept("ironic"))
        # provision wrote the disks: the deploy step after it records the instance
        with task_manager.acquire(self.context, self.node.uuid) as task, \
                mock.patch.object(task.driver.boot, "prepare_instance"):
            task.driver.deploy.prepare_instance_boot(task)
        self.node.refresh()
        self.assertEqual(INSTANCE, self.node.driver_internal_info[rebuild.KEY])
        self.assertTrue(contract.build(self.node)["rebuild"])
        self.assertEqual((True, True), self.kept())
        self.assertEqual((True, True), self.kept("ironic"))

    def test_another_instance_on_the_node_is_a_first_deploy(self):
        rebuild.mark(self.node)
        self.node.instance_uuid = "0d4c1b3e-2f55-4b9e-8d0f-7c2a9e6b1f00"
        self.assertFalse(contract.build(self.node)["rebuild"])
        self.assertEqual((False, False), self.kept())

    def test_undeploy_forgets_it_before_cleaning(self):
        rebuild.mark(self.node)
        self.node.provision_state = states.DELETING
        self.node.target_provision_state = states.AVAILABLE
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task, \
                mock.patch("ironic.conductor.utils.node_power_action"), \
                mock.patch("ironic.conductor.cleaning.do_node_clean") as clean:
            conductor = mock.Mock()
            conductor._get_steps_for_automated_cleaning.return_value = (None, False)
            manager.ConductorManager._do_node_tear_down(conductor, task, states.ACTIVE)
        clean.assert_called_once()       # the cleaning for the next tenant comes after
        self.node.refresh()
        self.assertNotIn(rebuild.KEY, self.node.driver_internal_info)

    def test_a_new_deploys_job_keeps_the_record(self):
        from ironic_driver.conversation import job
        rebuild.mark(self.node)
        job.begin(self.node)
        self.assertIn(rebuild.KEY, self.node.driver_internal_info)

    def test_an_array_is_kept_on_rebuild_and_made_on_a_first_deploy(self):
        """An md array and its member partitions (issue 54; refused before: the plan would
        have re-created the array)."""
        layout = copy.deepcopy(LAYOUT)
        layout["disks"][0]["partitions"][2:2] = [
            {"id": "m1", "size": "1GiB", "type": "raid", "keep": "on_rebuild"},
            {"id": "m2", "size": "1GiB", "type": "raid", "keep": "on_rebuild"}]
        layout["raids"] = [{"id": "md", "level": 1, "members": ["m1", "m2"],
                            "keep": "on_rebuild"}]
        layout["filesystems"].append({"device": "md", "type": "ext4", "mount": "/data"})
        self.node.instance_info = dict(self.node.instance_info, provision_layout=layout)

        def kept():
            doc = sent.payload(self.node, "native")
            return ([p["keep"] for p in doc["disks"][0]["partitions"][2:4]],
                    doc["raids"][0]["keep"])
        self.assertEqual(([False, False], False), kept())
        rebuild.mark(self.node)
        self.assertEqual(([True, True], True), kept())
