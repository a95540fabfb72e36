"""A job whose exit 0 was recorded but whose resume never arrived (its conductor died right
after the save, or the RPC found no free worker) is resumed again by the next look past
job.resume_grace, and only then, and only at our own step. tests/ironic/integration/
test_failover.py proves it with two real conductors."""

import time
from unittest import mock

from ironic.common import states
from ironic.conductor import task_manager
from ironic.conductor import utils as manager_utils

from ironic_driver.conversation import follow, job
from ironic_driver.document import sent
from tests.unit.ironic_driver import dbcase

OUR_CLEAN_STEP = {"interface": "deploy", "step": "erase_devices_metadata", "priority": 99,
                  "argsinfo": None, "abortable": False}


class TestLostResume(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_node(driver_info={"provision_ssh_address": "192.0.2.10"})
        self.config(poll_interval=10, group="provision_agent")     # grace: 30 s

    def _clean_done(self, seconds_ago, step=OUR_CLEAN_STEP):
        self.node.provision_state = states.CLEANWAIT
        self.node.target_provision_state = states.AVAILABLE
        self.node.clean_step = step
        self.node.driver_internal_info = {
            "provision_phase": "done", "provision_exit_code": 0,
            "provision_done_at": time.time() - seconds_ago, "provision_events": [],
            "provision_events_count": 3, "provision_events_offset": 120}
        self.node.save()

    def _look(self, spawn=None):
        with mock.patch.object(manager_utils, "notify_conductor_resume_clean") as clean, \
                mock.patch.object(manager_utils, "notify_conductor_resume_deploy") as dep, \
                mock.patch.object(follow, "connect") as connect:
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                follow.follow(task, sent.for_ramdisk, spawn)
        self.node.refresh()
        connect.assert_not_called()     # a resume needs nothing from the ramdisk
        return clean, dep

    def test_a_cleaning_whose_resume_was_lost_is_resumed_again(self):
        self._clean_done(seconds_ago=31)
        clean, dep = self._look(spawn=mock.Mock())
        clean.assert_called_once()
        dep.assert_not_called()
        # the next resend waits another grace
        self.assertGreater(self.node.driver_internal_info["provision_done_at"], time.time() - 5)
        self.assertEqual("done", self.node.driver_internal_info["provision_phase"])

    def test_within_the_grace_the_resume_is_still_on_its_way(self):
        self._clean_done(seconds_ago=5)
        clean, dep = self._look()
        clean.assert_not_called()
        dep.assert_not_called()

    def test_another_interfaces_step_waiting_is_not_resumed(self):
        self._clean_done(seconds_ago=300, step={"interface": "bios", "step":
                                                "apply_configuration", "priority": 0})
        clean, dep = self._look()
        clean.assert_not_called()

    def test_a_deploy_whose_resume_was_lost_resumes_on_this_lock(self):
        self.node.provision_state = states.DEPLOYWAIT
        self.node.target_provision_state = states.ACTIVE
        self.node.deploy_step = {"interface": "deploy", "step": "deploy", "priority": 100,
                                 "args": {}}
        self.node.driver_internal_info = {"provision_phase": "done", "provision_exit_code": 0,
                                          "provision_done_at": time.time() - 60}
        self.node.save()
        spawn = mock.Mock()
        self._look(spawn=spawn)
        # resume_deploy: the resume event moved the node on and the remaining steps were
        # handed to the conductor's worker
        self.assertEqual(states.DEPLOYING, self.node.provision_state)
        spawn.assert_called_once()

    def test_exit_0_records_when_it_was_seen(self):
        self._clean_done(seconds_ago=0)
        info = dict(self.node.driver_internal_info, provision_phase="running")
        info.pop("provision_done_at")
        self.node.driver_internal_info = info
        self.node.save()
        with mock.patch.object(manager_utils, "notify_conductor_resume_clean"):
            self.follow_once(False, {"exit_code": 0, "events": [], "events_offset": 120,
                                     "tail": ""})
        self.assertAlmostEqual(time.time(), self.node.driver_internal_info["provision_done_at"],
                               delta=5)


def test_the_sweep_takes_overdue_nodes_only():
    now = 1000.0
    done = {"provision_phase": "done", "provision_exit_code": 0}
    assert job.resume_overdue_info(dict(done, provision_done_at=now - 31), 30, now)
    assert not job.resume_overdue_info(dict(done, provision_done_at=now - 29), 30, now)
    assert not job.resume_overdue_info(dict(done, provision_exit_code=4,
                                            provision_done_at=0), 30, now)
    assert not job.resume_overdue_info({"provision_phase": "failed"}, 30, now)
