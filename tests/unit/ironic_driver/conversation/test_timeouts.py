"""How long a job may go without progress, on Ironic's DB fixtures: the limit is Ironic's own
callback timeout unless deploy_timeout is set, it counts from the node's provisioning time,
and progress seen over SSH moves that time (as ironic-python-agent's heartbeats do)."""

import datetime

from ironic.common import states
from oslo_utils import timeutils

from tests.unit.ironic_driver import dbcase

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"
RUNNING = {"exit_code": None, "events_offset": 0, "tail": "", "events": []}


class TestTimeouts(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_bound_node(KEY)

    def _quiet_for(self, seconds, **internal):
        self.deploy_waiting(**internal)
        self.node.provision_updated_at = timeutils.utcnow() - datetime.timedelta(
            seconds=seconds)
        self.node.save()

    def test_progress_moves_the_provisioning_time_ironic_counts_from(self):
        self._quiet_for(1000, provision_phase="running")
        before = self.node.provision_updated_at
        self.follow_once(True, {"exit_code": None, "events_offset": 80, "tail": "",
                                "events": [{"event": "progress", "bytes": 1}]})
        self.assertGreater(timeutils.normalize_time(self.node.provision_updated_at),
                           timeutils.normalize_time(before) + datetime.timedelta(seconds=900))

    def test_a_look_that_sees_nothing_new_does_not(self):
        self._quiet_for(1000, provision_phase="running")
        before = self.node.provision_updated_at
        self.follow_once(True, RUNNING)
        self.assertEqual(before, self.node.provision_updated_at)
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)

    def test_silence_past_ironics_callback_timeout_fails_with_a_reason(self):
        self.config(deploy_callback_timeout=600, group="conductor")
        self._quiet_for(601, provision_phase="running", provision_last_ssh_error="timed out")
        start = self.follow_once(True, RUNNING)
        start.assert_not_called()
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("provision showed no progress for 601 s ([conductor]"
                      "deploy_callback_timeout is 600 s; phase running); last SSH error: "
                      "timed out", self.node.last_error)

    def test_a_long_provision_that_reports_progress_outlives_the_callback_timeout(self):
        # (a node is failed poll_interval + running_poll_interval, 40 s, before Ironic's
        # check would)
        self.config(deploy_callback_timeout=600, group="conductor")
        self._quiet_for(555, provision_phase="running")
        for offset in (100, 200):
            self.follow_once(True, {"exit_code": None, "events_offset": offset, "tail": "",
                                    "events": [{"event": "progress", "bytes": offset}]})
            self._quiet_for(555, provision_phase="running", provision_events_offset=offset)
        self.follow_once(True, RUNNING)
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)

    def test_cleaning_uses_the_clean_callback_timeout(self):
        self.config(deploy_callback_timeout=0, clean_callback_timeout=300, group="conductor")
        self.deploy_waiting(provision_phase="running")
        self.node.provision_state = states.CLEANWAIT
        self.node.target_provision_state = states.AVAILABLE
        self.node.clean_step = {"interface": "deploy", "step": "erase_devices_metadata"}
        self.node.save()    # a state change moves the provisioning time itself: set it after
        self.node.provision_updated_at = timeutils.utcnow() - datetime.timedelta(seconds=301)
        self.node.save()
        self.follow_once(True, RUNNING)
        self.assertEqual(states.CLEANFAIL, self.node.provision_state)
        self.assertIn("provision erase showed no progress for 301 s ([conductor]"
                      "clean_callback_timeout is 300 s", self.node.last_error)

    def test_deploy_timeout_when_set_is_the_limit(self):
        self.config(deploy_timeout=60, group="provision_agent")
        self._quiet_for(61)
        self.follow_once(True, RUNNING)
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("no progress for 61 s ([provision_agent]deploy_timeout is 60 s; phase "
                      "wait_ramdisk)", self.node.last_error)

    def test_a_callback_timeout_of_0_means_none(self):
        self.config(deploy_callback_timeout=0, group="conductor")
        self._quiet_for(10 ** 6, provision_phase="running")
        self.follow_once(True, RUNNING)
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)
