"""The ramdisk's vendor steps through Ironic's own cleaning code, on its DB fixtures
(ironic_driver/conversation/vendor_steps.py): with [provision_agent]ramdisk_steps the cleaning
first lists the ramdisk's steps (`provision steps`), a manual cleaning's vendor step is checked
against them by Ironic's set_node_cleaning_steps and run in the ramdisk (`provision step`),
and one the ramdisk does not offer fails the cleaning naming what it offers. The same with a
real Ironic and the stand-in ramdisk: tests/ironic/integration/test_vendor_steps.py."""

import json
import time
from unittest import mock

from ironic.common import exception, states
from ironic.conductor import cleaning, servicing, task_manager
from ironic.conductor import utils as manager_utils

from ironic_driver.conversation import follow, remote, vendor_steps
from ironic_driver.document import sent
from tests.unit.ironic_driver import dbcase

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"
TUNE = {"step": "acme_apply_settings", "interface": "deploy", "priority": 0,
        "types": ["clean", "deploy", "service"], "description": "Apply ACME settings",
        "argsinfo": {"settings": {"description": "by name", "required": True}},
        "args_schema": {"type": "object"}, "abortable": False, "plugin": "acme"}
STEPS_EVENT = {"event": "steps", "hardware": [{"plugin": "acme", "support": 2}],
               "steps": [TUNE]}
ASKED = [{"interface": "deploy", "step": "acme_apply_settings",
          "args": {"settings": {"BootMode": "Uefi"}}}]
RUNNING = {"exit_code": None, "events": [], "events_offset": 0, "tail": ""}


class TestVendorCleanSteps(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.config(ramdisk_steps=True, group="provision_agent")
        self.node = self.make_node(driver_info={}, provision_state=states.CLEANING,
                                   target_provision_state=states.MANAGEABLE)

    def _manual_clean(self, steps):
        with mock.patch.object(manager_utils, "node_power_action"), \
                task_manager.acquire(self.context, self.node.uuid) as task:
            cleaning.do_node_clean(task, clean_steps=steps)
        self.node.refresh()

    def _heartbeat_and_look(self, status):
        """The ramdisk's heartbeat (it starts the waiting job), then a look with status."""
        with mock.patch.object(follow, "connect", return_value=mock.Mock()), \
                mock.patch.object(remote, "verify_binding"), \
                mock.patch.object(remote, "start", return_value=True) as start, \
                mock.patch.object(remote, "status", return_value=status), \
                mock.patch.object(manager_utils, "notify_conductor_resume_clean") as resume:
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                task.driver.deploy.heartbeat(task, "https://192.0.2.30:22", "1.0", None)
            self.node.refresh()
            if self.node.provision_state == states.CLEANWAIT:
                with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                    follow.follow(task, sent.for_ramdisk)
        self.node.refresh()
        return start, resume

    def _listed(self, steps_event=STEPS_EVENT):
        self._manual_clean(ASKED)
        # Ironic could not check the vendor step before the ramdisk booted: it waits
        self.assertEqual(states.CLEANWAIT, self.node.provision_state, self.node.last_error)
        self.assertFalse(self.node.clean_step)
        start, resume = self._heartbeat_and_look(
            {"exit_code": 0, "events": [steps_event], "events_offset": 10, "tail": ""})
        _session, _dir, text, command = start.call_args[0]
        self.assertEqual(["/usr/bin/provision", "steps"], command)
        return resume

    def test_a_manual_vendor_clean_step_is_listed_checked_and_run_in_the_ramdisk(self):
        resume = self._listed()
        resume.assert_called_once()
        info = self.node.driver_internal_info
        self.assertEqual(["acme_apply_settings"],
                         [s["step"] for s in info[vendor_steps.CACHE]["clean"]])
        self.assertEqual(ASKED, [{k: s[k] for k in ("interface", "step", "args")}
                                 for s in info["clean_steps"]])
        with task_manager.acquire(self.context, self.node.uuid) as task:
            listed = {s["step"]: s for s in task.driver.deploy.get_clean_steps(task)}
            self.assertEqual(0, listed["acme_apply_settings"]["priority"])
            self.assertIn("erase_devices_metadata", listed)
            # what the RPC continue_node_clean does: Ironic executes the vendor step
            task.resume_cleaning()
            cleaning.continue_node_clean(task)
        self.node.refresh()
        self.assertEqual(states.CLEANWAIT, self.node.provision_state, self.node.last_error)
        self.assertEqual("acme_apply_settings", self.node.clean_step["step"])
        # the ramdisk the listing ran in takes the step: no heartbeat to wait for
        self.assertEqual("192.0.2.30", self.node.driver_internal_info["provision_ssh_address"])
        start = self.follow_once(True, RUNNING)
        _session, _dir, text, command = start.call_args[0]
        self.assertEqual(["/usr/bin/provision", "step"], command)
        self.assertEqual({"step": "acme_apply_settings", "type": "clean",
                          "args": {"settings": {"BootMode": "Uefi"}}}, json.loads(text))
        with mock.patch.object(manager_utils, "notify_conductor_resume_clean") as resume:
            self.follow_once(True, {"exit_code": 0, "events": [], "events_offset": 0,
                                    "tail": ""})
        resume.assert_called_once()

    def test_a_step_the_ramdisk_does_not_offer_fails_the_cleaning_naming_what_it_offers(self):
        resume = self._listed(dict(STEPS_EVENT, steps=[dict(TUNE, step="acme_other")]))
        resume.assert_not_called()
        self.assertEqual(states.CLEANFAIL, self.node.provision_state)
        self.assertIn("acme_apply_settings", self.node.last_error)
        self.assertIn("its ramdisk offers acme_other", self.node.last_error)

    def test_a_listing_that_takes_one_of_our_step_names_is_refused(self):
        self._listed(dict(STEPS_EVENT, steps=[dict(TUNE, step="erase_devices")]))
        self.assertEqual(states.CLEANFAIL, self.node.provision_state)
        self.assertIn("the ramdisk's list of vendor steps is unusable", self.node.last_error)

    def test_without_ramdisk_steps_cleaning_starts_at_once(self):
        self.config(ramdisk_steps=False, group="provision_agent")
        with mock.patch.object(manager_utils, "node_power_action"), \
                task_manager.acquire(self.context, self.node.uuid) as task:
            self.assertIsNone(task.driver.deploy.prepare_cleaning(task))
        self.node.refresh()
        self.assertNotIn(vendor_steps.LISTING, self.node.driver_internal_info)


class TestVendorDeploySteps(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_node(driver_info={})

    def _at_step(self, phase):
        self.deploy_waiting(provision_phase=phase, provision_ssh_address="192.0.2.30",
                            provision_ssh_port=22, provision_host_key=KEY,
                            agent_url="https://192.0.2.30:22", provision_done_at=time.time(),
                            provision_ramdisk_steps={"deploy": [dict(TUNE, priority=70)]})
        self.node.deploy_step = dict(ASKED[0], priority=70)
        self.node.save()

    def test_the_cached_deploy_step_is_offered_and_runs_after_provision(self):
        self._at_step("done")
        with task_manager.acquire(self.context, self.node.uuid) as task:
            names = [s["step"] for s in task.driver.deploy.get_deploy_steps(task)]
            self.assertIn("acme_apply_settings", names)
            self.assertEqual(states.DEPLOYWAIT, task.driver.deploy.execute_deploy_step(
                task, self.node.deploy_step))
        self.node.refresh()
        start = self.follow_once(True, RUNNING)
        self.assertEqual(["/usr/bin/provision", "step"], start.call_args[0][3])
        self.assertEqual("deploy", json.loads(start.call_args[0][2])["type"])

    def test_a_deploy_step_before_the_ramdisk_booted_is_refused_saying_which_priority(self):
        self._at_step("wait_ramdisk")
        with task_manager.acquire(self.context, self.node.uuid) as task:
            with self.assertRaisesRegex(exception.InstanceDeployFailure,
                                        "give it a priority between 21 and 99"):
                task.driver.deploy.execute_deploy_step(task, self.node.deploy_step)


class TestVendorServiceSteps(dbcase.NodeTestCase):
    """Servicing an active node: the ramdisk booted, its steps listed first, the service step
    checked by Ironic's set_node_service_steps and run there, then the instance back."""

    def setUp(self):
        super().setUp()
        self.node = self.make_node(driver_info={}, provision_state=states.SERVICING,
                                   target_provision_state=states.ACTIVE)

    def test_a_vendor_service_step_is_listed_checked_and_run_in_the_ramdisk(self):
        with mock.patch.object(manager_utils, "node_power_action") as power, \
                task_manager.acquire(self.context, self.node.uuid) as task, \
                mock.patch.object(task.driver.boot, "prepare_ramdisk") as prepare:
            servicing.do_node_service(task, service_steps=ASKED)
        self.node.refresh()
        self.assertEqual(states.SERVICEWAIT, self.node.provision_state, self.node.last_error)
        self.assertEqual([states.POWER_OFF, states.POWER_ON],
                         [c.args[1] for c in power.call_args_list])
        prepare.assert_called_once()
        with mock.patch.object(follow, "connect", return_value=mock.Mock()), \
                mock.patch.object(remote, "verify_binding"), \
                mock.patch.object(remote, "start", return_value=True) as start, \
                mock.patch.object(remote, "status", return_value={
                    "exit_code": 0, "events": [STEPS_EVENT], "events_offset": 9, "tail": ""}), \
                mock.patch.object(manager_utils, "notify_conductor_resume_service") as resume:
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                task.driver.deploy.heartbeat(task, "https://192.0.2.30:22", "1.0", None)
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                follow.follow(task, sent.for_ramdisk)
        self.node.refresh()
        self.assertEqual(["/usr/bin/provision", "steps"], start.call_args[0][3])
        resume.assert_called_once()
        self.assertEqual(["acme_apply_settings"],
                         [s["step"] for s in self.node.driver_internal_info["service_steps"]])
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.process_event("resume")        # what the RPC continue_node_service does
            servicing.continue_node_service(task)
        self.node.refresh()
        self.assertEqual(states.SERVICEWAIT, self.node.provision_state, self.node.last_error)
        self.assertEqual("acme_apply_settings", self.node.service_step["step"])
        start = self.follow_once(True, RUNNING)
        self.assertEqual(["/usr/bin/provision", "step"], start.call_args[0][3])
        self.assertEqual("service", json.loads(start.call_args[0][2])["type"])
        with mock.patch.object(manager_utils, "notify_conductor_resume_service") as resume:
            self.follow_once(True, {"exit_code": 0, "events": [], "events_offset": 0,
                                    "tail": ""})
        resume.assert_called_once()

    def test_a_failed_service_step_fails_the_servicing_with_its_output(self):
        self.node.provision_state = states.SERVICEWAIT
        self.node.service_step = dict(ASKED[0], priority=0)
        self.node.driver_internal_info = {
            "provision_phase": "running", "provision_started_at": time.time(),
            "provision_ssh_address": "192.0.2.30", "provision_ssh_port": 22,
            "provision_host_key": KEY, "provision_events_offset": 0,
            "provision_ramdisk_steps": {"service": [TUNE]}}
        self.node.save()
        self.follow_once(True, {"exit_code": 4, "events": [], "events_offset": 0,
                                "tail": "provision: error: acme-fwcli said no"})
        self.assertEqual(states.SERVICEFAIL, self.node.provision_state)
        self.assertIn("provision step acme_apply_settings exited with 4", self.node.last_error)
        self.assertIn("acme-fwcli said no", self.node.last_error)
