"""The deploy interface's side of lookup/heartbeat, on Ironic's DB fixtures."""

import os
from unittest import mock

from ironic.common import states
from ironic.conductor import task_manager

from ironic_driver import deploy
from ironic_driver.conversation import fanout, follow, job
from ironic_driver.document import sent
from tests.unit.ironic_driver import dbcase

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"
OTHER = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ6lv5PDMyrRMh5DVEvsmdZP8EuUYTtmNIb6+VavS+vd"


class TestHeartbeat(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_node(driver_info={},
                                   instance_info={"image_source": "http://x/img"})

    def _key_file(self, text):
        path = os.path.join(self.useFixture(__import__("fixtures").TempDir()).path, "k.crt")
        with open(path, "w") as f:
            f.write(text + "\n")
        return path

    def _heartbeat(self, url="https://192.0.2.20:22", key=KEY, status=None):
        with mock.patch.object(follow, "follow") as follow_once:
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                task.driver.deploy.heartbeat(task, url, "1.0",
                                             self._key_file(key) if key else None,
                                             agent_status=status)
        self.node.refresh()
        return follow_once

    def test_first_heartbeat_records_address_and_key_and_starts(self):
        self.deploy_waiting(provision_awaiting_heartbeat=True)
        started = self._heartbeat("https://192.0.2.20:2222")
        info = self.node.driver_internal_info
        self.assertIsNone(info["provision_awaiting_heartbeat"])   # paced by the clock no more
        self.assertEqual("192.0.2.20", info["provision_ssh_address"])
        self.assertEqual(2222, info["provision_ssh_port"])
        self.assertEqual(KEY, info["provision_host_key"])
        self.assertEqual("https://192.0.2.20:2222", info["agent_url"])
        self.assertEqual(1, info["provision_heartbeats"])
        self.assertEqual(1, started.call_count)
        # counted as a look: the sweep's next one keeps poll_interval (or, once the job
        # runs in a ramdisk that heartbeats, running_poll_interval) from it
        self.assertLess(fanout.FOLLOWERS.since_last(self.node.uuid), 5)
        # found by a heartbeat: the ramdisk will have to prove its binding
        self.assertEqual(("192.0.2.20", 2222, KEY, True),
                         follow.ssh_target(self.node, deploy.OPTS()))

    def test_later_heartbeats_do_not_start_again(self):
        self.deploy_waiting(provision_phase="running", provision_ssh_address="192.0.2.20",
                      provision_ssh_port=22, provision_host_key=KEY)
        started = self._heartbeat()
        self.assertEqual(0, started.call_count)
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)

    def _running(self):
        self.deploy_waiting(provision_phase="running", provision_ssh_address="192.0.2.20",
                            provision_ssh_port=22, provision_host_key=KEY)

    def test_the_heartbeat_that_says_the_job_exited_has_it_looked_at_at_once(self):
        self._running()
        looked = self._heartbeat(status="end")
        self.assertEqual(1, looked.call_count)
        self.assertFalse(fanout.FOLLOWERS.hurried(self.node.uuid))
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)   # the look decides

    def test_a_ramdisk_saying_end_again_and_again_gets_one_look_per_poll_interval(self):
        self.config(poll_interval=600, group="provision_agent")   # however slow this host
        self._running()
        looks = [self._heartbeat(status="end").call_count for _ in range(3)]
        self.assertEqual([1, 0, 0], looks)
        # the sweep takes it next, without waiting for running_poll_interval
        self.assertTrue(fanout.FOLLOWERS.hurried(self.node.uuid))

    def test_a_heartbeat_that_says_nothing_new_is_written_once_a_minute(self):
        self._running()
        self._heartbeat()
        first = dict(self.node.driver_internal_info)
        with mock.patch.object(task_manager.TaskManager, "upgrade_lock") as upgrade:
            self._heartbeat()
            self._heartbeat()
        upgrade.assert_not_called()                     # no lock, no write, no turn
        self.assertEqual(first["provision_heartbeats"],
                         self.node.driver_internal_info["provision_heartbeats"])
        info = dict(first, agent_last_heartbeat="2026-01-01T00:00:00")
        self.node.driver_internal_info = info
        self.node.save()
        self._heartbeat()                                # a minute later: written again
        self.assertEqual(first["provision_heartbeats"] + 1,
                         self.node.driver_internal_info["provision_heartbeats"])

    def test_no_look_while_the_sweep_is_looking(self):
        self._running()
        with fanout.FOLLOWERS.claim(self.node.uuid, 8):
            self.assertEqual(0, self._heartbeat(status="end").call_count)
        self.assertTrue(fanout.FOLLOWERS.hurried(self.node.uuid))

    def test_no_look_in_a_heartbeat_while_the_pollers_are_all_busy(self):
        # 500 jobs ending together: their heartbeats must not hold every conductor worker
        self.config(periodic_max_workers=2, group="conductor")
        self._running()
        with fanout.FOLLOWERS.claim("other-1", 2), fanout.FOLLOWERS.claim("other-2", 2):
            self.assertEqual(0, self._heartbeat(status="end").call_count)
        self.assertTrue(fanout.FOLLOWERS.hurried(self.node.uuid))
        self.deploy_waiting(provision_phase="wait_ramdisk")
        with fanout.FOLLOWERS.claim("other-1", 2), fanout.FOLLOWERS.claim("other-2", 2):
            self.assertEqual(0, self._heartbeat().call_count)     # the start waits too
        self.assertEqual(1, self._heartbeat().call_count)         # and comes when one frees

    def test_a_changed_key_fails_the_deploy(self):
        self.deploy_waiting(provision_phase="running", provision_ssh_address="192.0.2.20",
                      provision_ssh_port=22, provision_host_key=KEY)
        self._heartbeat(key=OTHER)
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("changed its address or host key", self.node.last_error)

    def test_a_heartbeat_outside_our_deploy_is_ignored(self):
        self.node.provision_state = states.ACTIVE
        self.node.save()
        started = self._heartbeat()
        self.assertNotIn("provision_ssh_address", self.node.driver_internal_info)
        self.assertEqual(0, started.call_count)

    def test_a_callback_without_an_address_fails(self):
        self.deploy_waiting()
        self._heartbeat("http://ramdisk.example:22")
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("does not name an IP address", self.node.last_error)

    def test_an_ipv6_heartbeat_records_the_address_in_its_one_spelling(self):
        self.deploy_waiting()
        self._heartbeat("https://[FD00:0:0::0050]:2222")
        info = self.node.driver_internal_info
        self.assertEqual("fd00::50", info["provision_ssh_address"])
        self.assertEqual(2222, info["provision_ssh_port"])
        self.assertEqual(("fd00::50", 2222, KEY, True),
                         follow.ssh_target(self.node, deploy.OPTS()))

    def test_a_malformed_ipv6_callback_fails_with_its_place(self):
        # the parse itself raised, outside the check that names callback_url
        self.deploy_waiting()
        self._heartbeat("https://[fd00::50:22")
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("callback_url 'https://[fd00::50:22' does not name an IP address",
                      self.node.last_error)

    def test_a_link_local_callback_fails(self):
        self.deploy_waiting()
        self._heartbeat("https://[fe80::5054:ff:fe12:3456%25ens2]:22")
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("names a link-local address", self.node.last_error)

    def test_static_address_and_pin_win_over_the_heartbeat(self):
        self.deploy_waiting(provision_ssh_address="192.0.2.20", provision_ssh_port=22,
                      provision_host_key=KEY)
        self.node.driver_info = {"provision_ssh_address": "198.51.100.7",
                                 "provision_host_key": OTHER}
        self.assertEqual(("198.51.100.7", 22, OTHER, False),
                         follow.ssh_target(self.node, deploy.OPTS()))
        self.node.driver_info = {"provision_host_key": OTHER}
        self.assertEqual(("192.0.2.20", 22, OTHER, True),
                         follow.ssh_target(self.node, deploy.OPTS()))
        # an IPv6 one in its one spelling, what known_hosts holds
        self.node.driver_info = {"provision_ssh_address": "FD00:0::7",
                                 "provision_host_key": OTHER}
        self.assertEqual(("fd00::7", 22, OTHER, False),
                         follow.ssh_target(self.node, deploy.OPTS()))

    def test_prepare_hands_the_boot_interface_ironics_agent_options(self):
        self.node.provision_state = states.DEPLOYING
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task, \
                mock.patch.object(task.driver.boot, "prepare_ramdisk") as prepare:
            task.driver.deploy.prepare(task)
        prepare.assert_called_once_with(mock.ANY, {"ipa-api-url": dbcase.API_URL,
                                                   "loglevel": "4"})

    def test_a_statically_pinned_node_keeps_the_builds_key(self):
        self.node.driver_info = {"provision_host_key": KEY}
        self.assertEqual({"ipa-api-url": dbcase.API_URL, "provision.hostkey": "baked",
                          "loglevel": "4"}, deploy.ramdisk_options(self.node))

    def test_follow_without_any_address_waits_and_says_why(self):
        self.deploy_waiting()
        with mock.patch.object(follow, "connect") as connect:
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                follow.follow(task, sent.for_ramdisk)
        connect.assert_not_called()
        self.node.refresh()
        self.assertIn("no heartbeat from the ramdisk yet",
                      self.node.driver_internal_info["provision_last_ssh_error"])
        # the sweep's next looks come by running_poll_interval: the heartbeat starts the job
        self.assertTrue(self.node.driver_internal_info["provision_awaiting_heartbeat"])


class TestTokenLostInTakeover(dbcase.NodeTestCase):
    """A lookup answered by a conductor killed after it saved the token: the conductor that
    took the node over reissues it once, so the ramdisk's next lookup gets one."""

    def setUp(self):
        super().setUp()
        self.node = self.make_node(driver_info={}, instance_info={})

    def _look(self, **internal):
        self.deploy_waiting(agent_secret_token="lost-with-conductor-0", **internal)
        with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
            follow.follow(task, sent.for_ramdisk)
        self.node.refresh()
        return self.node.driver_internal_info

    def test_a_job_begun_by_a_dead_conductor_gets_its_token_reissued_after_a_silence(self):
        self.config(host="conductor-1")
        info = self._look(provision_begun_by="conductor-0")
        self.assertEqual("lost-with-conductor-0", info["agent_secret_token"])  # not at once
        taken = info["provision_taken_over"]
        self.assertEqual("conductor-1", taken[0])
        info = self._look(provision_begun_by="conductor-0",
                          provision_taken_over=["conductor-1", taken[1] - 30])
        self.assertEqual("lost-with-conductor-0", info["agent_secret_token"])  # 30 s: wait
        info = self._look(provision_begun_by="conductor-0",
                          provision_taken_over=["conductor-1", taken[1] - 61])
        self.assertIsNone(info["agent_secret_token"])
        self.assertEqual("conductor-1", info["provision_token_reissued_by"])
        # the next lookup's token stays: reissued once per conductor that took it over
        info = self._look(provision_begun_by="conductor-0",
                          provision_taken_over=["conductor-1", taken[1] - 600],
                          provision_token_reissued_by="conductor-1")
        self.assertEqual("lost-with-conductor-0", info["agent_secret_token"])

    def test_a_job_says_which_conductor_began_it(self):
        self.config(host="conductor-7")
        with task_manager.acquire(self.context, self.node.uuid) as task:
            job.begin(task.node)
            self.assertEqual("conductor-7",
                             task.node.driver_internal_info["provision_begun_by"])

    def test_the_conductor_that_began_it_and_a_pregenerated_token_keep_theirs(self):
        self.config(host="conductor-0")
        self.assertEqual("lost-with-conductor-0",
                         self._look(provision_begun_by="conductor-0")["agent_secret_token"])
        self.config(host="conductor-1")
        self.assertEqual("lost-with-conductor-0", self._look(
            provision_begun_by="conductor-0",
            agent_secret_token_pregenerated=True)["agent_secret_token"])


class TestHeartbeatAsIronicDoes(dbcase.NodeTestCase):
    """Ironic's own heartbeat handling (agent_base.HeartbeatMixin) for a node in maintenance
    and for a node another thread holds locked."""

    def setUp(self):
        super().setUp()
        self.node = self.make_node(driver_info={},
                                   instance_info={"image_source": "http://x/img"})

    def _heartbeat(self):
        with mock.patch.object(follow, "follow") as follow_once:
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                task.driver.deploy.heartbeat(task, "https://192.0.2.20:22", "1.0", None)
        self.node.refresh()
        return follow_once

    def test_a_heartbeat_in_maintenance_aborts_the_deploy_and_starts_nothing(self):
        self.config(allow_provisioning_in_maintenance=False, group="conductor")
        self.deploy_waiting()
        self.node.maintenance = True
        self.node.save()
        started = self._heartbeat()
        started.assert_not_called()
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertEqual("Deploy aborted as node is in maintenance mode", self.node.last_error)

    def test_a_heartbeat_in_maintenance_aborts_the_cleaning(self):
        self.config(allow_provisioning_in_maintenance=False, group="conductor")
        self.deploy_waiting()
        self.node.provision_state = states.CLEANWAIT
        self.node.target_provision_state = states.AVAILABLE
        self.node.clean_step = {"interface": "deploy", "step": "erase_devices_metadata"}
        self.node.maintenance = True
        self.node.save()
        started = self._heartbeat()
        started.assert_not_called()
        self.assertEqual(states.CLEANFAIL, self.node.provision_state)
        self.assertIn("Cleaning aborted as node is in maintenance mode", self.node.last_error)

    def test_by_default_a_heartbeat_in_maintenance_is_only_recorded(self):
        # [conductor]allow_provisioning_in_maintenance is true by default
        self.deploy_waiting()
        self.node.maintenance = True
        self.node.save()
        started = self._heartbeat()
        started.assert_not_called()
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)
        self.assertEqual("192.0.2.20", self.node.driver_internal_info["provision_ssh_address"])

    def test_a_heartbeat_that_meets_a_locked_node_is_not_an_error(self):
        self.deploy_waiting()
        self.node.reservation = "another-conductor"     # a poll holds it
        self.node.save()
        started = self._heartbeat()
        started.assert_not_called()
        self.assertIsNone(self.node.last_error)
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)
        self.assertNotIn("provision_ssh_address", self.node.driver_internal_info)
