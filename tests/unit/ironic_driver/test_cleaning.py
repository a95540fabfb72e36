"""The deploy interface's cleaning, on Ironic's DB fixtures: the clean step Ironic sees, the
ramdisk booted for it, `provision erase` started and followed, and the cleaning resumed or
failed. The real cycle (a VM cleaned by a real Ironic) is in test_power_cycle.py."""

import json
import time
from unittest import mock

from ironic.common import dhcp_factory, states
from ironic.conductor import cleaning, task_manager
from ironic.conductor import utils as manager_utils
from ironic.drivers.modules import fake

# deploy imports Ironic's conductor modules now, before Ironic's test base forbids the
# subprocess that one of their imports (zeroconf's ifaddr) runs at import time.
from ironic_driver import deploy
from ironic_driver.conversation import follow, remote
from ironic_driver.document import sent
from tests.unit.ironic_driver import dbcase

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"


class TestCleaning(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_node(driver_info={},
                                   properties={"skip_block_devices": [{"serial": "keepme"}]})

    def _clean_waiting(self, **internal):
        self.node.provision_state = states.CLEANWAIT
        self.node.target_provision_state = states.AVAILABLE
        self.node.clean_step = {"interface": "deploy", "step": "erase_devices_metadata",
                                "priority": 99, "argsinfo": None, "abortable": False}
        info = {"provision_phase": "wait_ramdisk", "provision_started_at": time.time(),
                "provision_events": [], "provision_events_count": 0,
                "provision_events_offset": 0, "provision_ssh_address": "192.0.2.20",
                "provision_ssh_port": 22, "provision_host_key": KEY}
        info.update(internal)
        self.node.driver_internal_info = info
        self.node.save()

    def _follow(self, started, status):
        return self.follow_once(started, status)

    def test_the_clean_step_ironic_sees(self):
        with task_manager.acquire(self.context, self.node.uuid) as task:
            steps = task.driver.deploy.get_clean_steps(task)
        by_name = {s["step"]: s for s in steps}
        self.assertEqual({"interface": "deploy", "step": "erase_devices_metadata",
                          "priority": 99, "abortable": False, "argsinfo": None,
                          "requires_ramdisk": True}, by_name["erase_devices_metadata"])
        # the whole-disk erases run only when asked for (manual cleaning or an override)
        self.assertEqual(0, by_name["erase_devices"]["priority"])
        self.assertEqual(0, by_name["erase_devices_express"]["priority"])
        self.assertEqual(3, len(steps))

    def test_prepare_cleaning_boots_the_ramdisk_and_waits_for_it(self):
        self.node.provision_state = states.CLEANING
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task, \
                mock.patch.object(task.driver.boot, "prepare_ramdisk") as prepare, \
                mock.patch.object(manager_utils, "node_power_action") as power:
            # synchronous: Ironic then sets the steps and runs ours, which waits
            self.assertIsNone(task.driver.deploy.prepare_cleaning(task))
            self.assertEqual(states.CLEANWAIT, task.driver.deploy.erase_devices_metadata(task))
        prepare.assert_called_once_with(mock.ANY, deploy.ramdisk_options(self.node))
        self.assertEqual({"ipa-api-url": dbcase.API_URL, "loglevel": "4"},
                         deploy.ramdisk_options(self.node))
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        self.node.refresh()
        self.assertEqual("wait_ramdisk", self.node.driver_internal_info["provision_phase"])

    def test_erase_is_started_with_the_nodes_skip_list(self):
        self._clean_waiting()
        start = self._follow(True, {"exit_code": None, "events": [], "events_offset": 0,
                                    "tail": ""})
        _session, _dir, text, command = start.call_args[0]
        self.assertEqual(["/usr/bin/provision", "erase"], command)
        self.assertEqual({"skip_block_devices": [{"serial": "keepme"}]}, json.loads(text))
        self.assertEqual("running", self.node.driver_internal_info["provision_phase"])
        self.assertEqual(states.CLEANWAIT, self.node.provision_state)

    def test_erase_devices_asks_provision_for_the_full_erase_with_ironics_passes(self):
        self.config(shred_random_overwrite_iterations=2, group="deploy")
        self._clean_waiting()
        self.node.clean_step = dict(self.node.clean_step, step="erase_devices", priority=0)
        self.node.save()
        start = self._follow(True, {"exit_code": None, "events": [], "events_offset": 0,
                                    "tail": ""})
        self.assertEqual({"skip_block_devices": [{"serial": "keepme"}], "method": "full",
                          "overwrite_passes": 3}, json.loads(start.call_args[0][2]))

    def test_erase_devices_express_asks_for_the_express_erase(self):
        self._clean_waiting()
        self.node.clean_step = dict(self.node.clean_step, step="erase_devices_express")
        self.node.save()
        start = self._follow(True, {"exit_code": None, "events": [], "events_offset": 0,
                                    "tail": ""})
        self.assertEqual("express", json.loads(start.call_args[0][2])["method"])

    def test_exit_0_resumes_the_cleaning(self):
        self._clean_waiting(provision_phase="running")
        with mock.patch.object(manager_utils, "notify_conductor_resume_clean") as resume:
            self._follow(True, {"exit_code": 0, "events": [], "events_offset": 0, "tail": ""})
        resume.assert_called_once()
        self.assertEqual("done", self.node.driver_internal_info["provision_phase"])

    def test_a_failed_erase_fails_the_cleaning_with_its_output(self):
        self._clean_waiting(provision_phase="running")
        with mock.patch.object(manager_utils, "notify_conductor_resume_clean") as resume:
            self._follow(True, {"exit_code": 4, "events": [], "events_offset": 0,
                                "tail": "provision: error: wipefs /dev/vdb: busy"})
        resume.assert_not_called()
        self.assertEqual(states.CLEANFAIL, self.node.provision_state)
        self.assertIn("provision exited with 4", self.node.last_error)
        self.assertIn("wipefs /dev/vdb: busy", self.node.last_error)

    def test_a_heartbeat_while_cleaning_records_the_ramdisk(self):
        self._clean_waiting(provision_ssh_address=None, provision_ssh_port=None,
                            provision_host_key=None)
        with mock.patch.object(follow, "follow") as follow_once, \
                task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
            task.driver.deploy.heartbeat(task, "https://192.0.2.30:22", "1.0", None)
        self.node.refresh()
        self.assertEqual("192.0.2.30", self.node.driver_internal_info["provision_ssh_address"])
        follow_once.assert_called_once()

    def test_clean_up_has_the_dhcp_provider_forget_the_node(self):
        """After undeploy the node's MACs must not be answered with its boot options any more
        (dnsmasq provider: `MAC,ignore`), as Ironic's own deploy interfaces do it."""
        with task_manager.acquire(self.context, self.node.uuid) as task, \
                mock.patch.object(dhcp_factory.DHCPFactory, "clean_dhcp") as clean_dhcp:
            task.driver.deploy.clean_up(task)
        clean_dhcp.assert_called_once_with(mock.ANY)


class TestOnlyOurStepErases(dbcase.NodeTestCase):
    """A manual cleaning with only another interface's step, one that reboots and waits (as
    Redfish BIOS and firmware steps do): the ramdisk booted for it heartbeats, and nothing of
    ours may run on the disks."""

    def setUp(self):
        super().setUp()
        self.config(enabled_bios_interfaces=["fake", "no-bios"])
        self.node = self.make_node(driver_info={}, bios_interface="fake",
                                   provision_state=states.CLEANING,
                                   target_provision_state=states.MANAGEABLE)

    def test_a_bios_step_waiting_in_clean_wait_never_starts_an_erase(self):
        steps = [{"interface": "bios", "step": "apply_configuration",
                  "args": {"settings": [{"name": "ProcTurboMode", "value": "Disabled"}]}}]
        def waits(_self, _task, settings):
            return states.CLEANWAIT     # applied at the next reboot, as Redfish does

        # the name and clean_step marks Ironic finds steps by
        waits.__dict__.update(fake.FakeBIOS.apply_configuration.__dict__)
        waits.__name__ = "apply_configuration"
        with mock.patch.object(fake.FakeBIOS, "apply_configuration", waits), \
                mock.patch.object(manager_utils, "node_power_action"), \
                task_manager.acquire(self.context, self.node.uuid) as task:
            cleaning.do_node_clean(task, clean_steps=steps)
        self.node.refresh()
        self.assertEqual(states.CLEANWAIT, self.node.provision_state, self.node.last_error)
        self.assertEqual("apply_configuration", self.node.clean_step["step"])
        with mock.patch.object(follow, "connect", return_value=mock.Mock()) as connect, \
                mock.patch.object(remote, "verify_binding"), \
                mock.patch.object(remote, "start", return_value=True) as start, \
                mock.patch.object(remote, "status"), \
                mock.patch.object(manager_utils, "notify_conductor_resume_clean") as resume:
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                task.driver.deploy.heartbeat(task, "https://192.0.2.30:22", "1.0", None)
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                follow.follow(task, sent.for_ramdisk)     # the periodic task's look
        connect.assert_not_called()
        start.assert_not_called()
        resume.assert_not_called()
        self.node.refresh()
        self.assertEqual(states.CLEANWAIT, self.node.provision_state)
        self.assertEqual("apply_configuration", self.node.clean_step["step"])
        # The ramdisk's address is kept for our own step, should one come later.
        self.assertEqual("192.0.2.30", self.node.driver_internal_info["provision_ssh_address"])
