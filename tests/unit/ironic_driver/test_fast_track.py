"""Ironic's fast track with the provision interface, on Ironic's DB fixtures: each decision
(reuse the running ramdisk, or power the node into a fresh one) and what it sends where. The
cycle through a real Ironic is tests/ironic/integration/test_fast_track.py."""

import datetime
import threading
import time
from unittest import mock

from ironic.common import states
from ironic.conductor import task_manager
from ironic.conductor import utils as manager_utils

from ironic_driver.conversation import fast_track, follow, remote, ssh
from tests.unit.ironic_driver import dbcase

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"
TOKEN = "the-agent-token"


def _iso(seconds_ago=0):
    """agent_last_heartbeat as Ironic writes it."""
    when = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(
        seconds=seconds_ago)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%f")


class FastTrackCase(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.config(data_driver="native", group="provision_agent")
        self.config(fast_track=True, group="deploy")
        self.node = self.make_node(driver_info={}, power_state=states.POWER_ON,
                                   instance_info={"provision_layout": {"version": 1}})

    def alive(self, seconds_ago=5, **extra):
        """The node's ramdisk heartbeated seconds_ago, bound with TOKEN, as fast track
        keeps it after a cleaning."""
        info = {"agent_url": "https://192.0.2.20:22", "agent_secret_token": TOKEN,
                "agent_last_heartbeat": _iso(seconds_ago), "provision_ssh_address": "192.0.2.20",
                "provision_ssh_port": 22, "provision_host_key": KEY, "provision_heartbeats": 4}
        info.update(extra)
        self.node.driver_internal_info = info
        self.node.save()

    def run_steps(self, state, *calls, binding=None, connect=None):
        """calls: functions of (task) run in order under one exclusive lock with the BMC,
        the boot interface and the ramdisk's SSH faked. Returns (power, prepare_ramdisk,
        remote.start, verify_binding) mocks and what the calls returned. remote.start is
        recording_start's (self.sent: the commands it sent)."""
        start = self.recording_start()

        self.node.provision_state = state
        self.node.target_provision_state = (states.ACTIVE if state == states.DEPLOYING
                                            else states.AVAILABLE)
        if state == states.CLEANING:
            self.node.clean_step = {"interface": "deploy", "step": "erase_devices_metadata",
                                    "priority": 99}
        else:
            self.node.deploy_step = {"interface": "deploy", "step": "deploy", "priority": 100}
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task, \
                mock.patch.object(manager_utils, "node_power_action") as power, \
                mock.patch.object(task.driver.boot, "prepare_ramdisk") as prepare, \
                mock.patch.object(task.driver.boot, "clean_up_ramdisk"), \
                mock.patch.object(follow, "connect",
                                  side_effect=connect or (lambda *a: mock.Mock())), \
                mock.patch.object(remote, "verify_binding", side_effect=binding) as bound, \
                mock.patch.object(remote, "start", side_effect=start) as start:
            results = [call(task) for call in calls]
        self.node.refresh()
        return power, prepare, start, bound, results

    def info(self):
        return self.node.driver_internal_info


class TestDeploy(FastTrackCase):
    def deploy(self, **kwargs):
        return self.run_steps(states.DEPLOYING, lambda t: t.driver.deploy.prepare(t),
                              lambda t: t.driver.deploy.deploy(t), **kwargs)

    def test_a_live_bound_ramdisk_takes_the_deploy_without_a_power_action(self):
        self.alive()
        power, prepare, start, bound, results = self.deploy()
        self.assertEqual(states.DEPLOYWAIT, results[1])
        power.assert_not_called()
        prepare.assert_not_called()              # the running ramdisk is not booted again
        # the binding is checked with the token the node holds, before anything is sent
        self.assertEqual((self.node.uuid, TOKEN), bound.call_args[0][2:])
        start.assert_called_once()
        self.assertEqual(["/usr/bin/provision", "--data_driver", "native"],
                         start.call_args[0][3])
        info = self.info()
        self.assertEqual("running", info["provision_phase"])
        self.assertEqual("192.0.2.20", info["provision_ssh_address"])    # the same ramdisk
        self.assertEqual({"to_look", "connect", "document", "start", "total"},
                         set(info["provision_start_timings"]))
        self.assertNotIn("provision_ramdisk_boot_skipped", info)

    def test_the_ssh_connection_is_made_while_the_bmc_is_asked(self):
        """The deploy step's two waits overlap: the ramdisk's SSH connection and Ironic's
        fast track rules (the BMC's power state). Only the step's own ask is looked at."""
        self.alive(provision_ramdisk_boot_skipped=True)   # as prepare() leaves it
        connected, seen = threading.Event(), []
        real = manager_utils.is_fast_track

        def connect(*_args):
            connected.set()
            return mock.Mock()

        def ask_the_bmc(task):
            seen.append(connected.wait(2))
            return real(task)
        with mock.patch.object(manager_utils, "is_fast_track", side_effect=ask_the_bmc):
            power, _prepare, start, _bound, _ = self.run_steps(
                states.DEPLOYING, lambda t: t.driver.deploy.deploy(t), connect=connect)
        self.assertEqual([True], seen)
        power.assert_not_called()
        start.assert_called_once()
        timings = self.info()["provision_start_timings"]
        self.assertGreaterEqual(timings["total"], timings["to_look"])

    def test_a_connection_made_for_a_ramdisk_the_rules_refuse_is_closed(self):
        self.alive(provision_ramdisk_boot_skipped=True)
        self.node.power_state = states.POWER_OFF
        self.node.save()
        session = mock.Mock()
        power, _prepare, start, _bound, _ = self.run_steps(
            states.DEPLOYING, lambda t: t.driver.deploy.deploy(t),
            connect=lambda *_args: session)
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        start.assert_not_called()
        deadline = time.monotonic() + 5
        while not session.close.called and time.monotonic() < deadline:
            time.sleep(0.01)
        session.close.assert_called_once_with()
        session.run.assert_not_called()       # nothing was sent on it

    def test_no_connection_is_made_for_a_node_whose_records_rule_its_ramdisk_out(self):
        self.alive(provision_ramdisk_boot_skipped=True, agent_secret_token=None)
        connected = []
        power, _prepare, start, _bound, _ = self.run_steps(
            states.DEPLOYING, lambda t: t.driver.deploy.deploy(t),
            connect=lambda *args: connected.append(args) or mock.Mock())
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        self.assertEqual([], connected)

    def test_fast_track_off_power_cycles(self):
        self.config(fast_track=False, group="deploy")
        self.alive()
        power, prepare, start, _bound, _ = self.deploy()
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        prepare.assert_called_once()
        start.assert_not_called()
        self.assertEqual("wait_ramdisk", self.info()["provision_phase"])
        self.assertNotIn("provision_ssh_address", self.info())    # the next boot's heartbeat

    def test_the_nodes_own_fast_track_false_wins(self):
        self.node.driver_info = {"fast_track": "false"}
        self.alive()
        power, _prepare, start, _bound, _ = self.deploy()
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        start.assert_not_called()

    def test_a_heartbeat_older_than_fast_track_timeout_power_cycles(self):
        self.config(fast_track_timeout=60, group="deploy")
        self.alive(seconds_ago=61)
        power, prepare, start, _bound, _ = self.deploy()
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        prepare.assert_called_once()
        start.assert_not_called()

    def test_a_heartbeat_that_went_stale_after_prepare_still_gets_a_booted_ramdisk(self):
        self.config(fast_track_timeout=60, group="deploy")
        self.alive()

        def age(task):
            task.node.set_driver_internal_info("agent_last_heartbeat", _iso(120))
        power, prepare, start, _bound, _ = self.run_steps(
            states.DEPLOYING, lambda t: t.driver.deploy.prepare(t), age,
            lambda t: t.driver.deploy.deploy(t))
        prepare.assert_called_once()        # skipped by prepare, done before the reboot
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        start.assert_not_called()

    def test_an_unbound_ramdisk_gets_nothing_and_the_node_is_power_cycled(self):
        self.alive()
        power, prepare, start, _bound, _ = self.deploy(binding=remote.BadRamdisk(
            "it is not the ramdisk that looked up node X: made with another agent token"))
        self.assertEqual([], self.sent)         # nothing was sent to it
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        prepare.assert_called_once()
        self.assertEqual("wait_ramdisk", self.info()["provision_phase"])
        self.assertNotIn("provision_ssh_address", self.info())

    def test_a_ramdisk_gone_meanwhile_falls_back_to_a_power_cycle(self):
        self.alive()

        def gone(*_args):
            raise ssh.Unreachable("cannot connect to 192.0.2.20 port 22: timed out")
        power, prepare, start, _bound, _ = self.deploy(connect=gone)
        start.assert_not_called()
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        prepare.assert_called_once()

    def test_a_powered_off_node_is_power_cycled(self):
        self.alive()
        self.node.power_state = states.POWER_OFF
        self.node.save()
        power, _prepare, start, _bound, _ = self.deploy()
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        start.assert_not_called()

    def test_no_token_no_reuse(self):
        # Ironic wiped it (a power action, a failed cleaning): the binding cannot match
        self.alive(agent_secret_token=None)
        power, _prepare, start, _bound, _ = self.deploy()
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        start.assert_not_called()

    def test_a_node_with_last_error_is_power_cycled(self):
        self.alive()
        self.node.last_error = "an earlier failure"
        self.node.save()
        power, _prepare, start, _bound, _ = self.deploy()
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        start.assert_not_called()


class TestCleaning(FastTrackCase):
    def clean(self, **kwargs):
        return self.run_steps(states.CLEANING, lambda t: t.driver.deploy.prepare_cleaning(t),
                              lambda t: t.driver.deploy.erase_devices_metadata(t),
                              **kwargs)

    def test_a_live_ramdisk_cleans_without_a_power_action(self):
        self.alive()
        power, prepare, start, bound, results = self.clean()
        self.assertEqual(states.CLEANWAIT, results[1])
        power.assert_not_called()
        prepare.assert_called_once()     # as Ironic's prepare_inband_cleaning does
        self.assertEqual(["/usr/bin/provision", "erase"], start.call_args[0][3])
        self.assertEqual((self.node.uuid, TOKEN), bound.call_args[0][2:])
        self.assertEqual("running", self.info()["provision_phase"])

    def test_fast_track_off_reboots_and_waits_for_the_heartbeat(self):
        self.config(fast_track=False, group="deploy")
        self.alive()
        power, _prepare, start, _bound, _ = self.clean()
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        start.assert_not_called()
        self.assertEqual("wait_ramdisk", self.info()["provision_phase"])

    def test_an_unreachable_ramdisk_is_rebooted_at_the_clean_step(self):
        self.alive()

        def gone(*_args):
            raise ssh.Unreachable("cannot connect to 192.0.2.20 port 22: refused")
        power, prepare, start, _bound, _ = self.clean(connect=gone)
        start.assert_not_called()
        power.assert_called_once_with(mock.ANY, states.REBOOT)
        prepare.assert_called_once()    # prepare_cleaning's, the boot stays prepared
        self.assertEqual("wait_ramdisk", self.info()["provision_phase"])

    def test_tear_down_leaves_a_fast_tracked_ramdisk_running_and_known(self):
        self.alive(provision_phase="done", provision_exit_code=0)
        power, _prepare, _start, _bound, _ = self.run_steps(
            states.CLEANING, lambda t: t.driver.deploy.tear_down_cleaning(t))
        power.assert_not_called()
        info = self.info()
        self.assertEqual("192.0.2.20", info["provision_ssh_address"])
        self.assertEqual(KEY, info["provision_host_key"])
        self.assertNotIn("provision_phase", info)

    def test_tear_down_without_fast_track_powers_off_and_forgets(self):
        self.config(fast_track=False, group="deploy")
        self.alive(provision_phase="done", provision_exit_code=0)
        power, _prepare, _start, _bound, _ = self.run_steps(
            states.CLEANING, lambda t: t.driver.deploy.tear_down_cleaning(t))
        power.assert_called_once_with(mock.ANY, states.POWER_OFF)
        self.assertNotIn("provision_ssh_address", self.info())


class TestHeartbeatOutsideAJob(FastTrackCase):
    def heartbeat(self, state, url="https://192.0.2.20:22"):
        self.node.provision_state = state
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
            task.driver.deploy.heartbeat(task, url, "1.0")
        self.node.refresh()

    def test_recorded_while_available_in_a_form_ironics_fast_track_reads(self):
        self.heartbeat(states.AVAILABLE)
        info = self.info()
        self.assertEqual("192.0.2.20", info["provision_ssh_address"])
        self.assertEqual("https://192.0.2.20:22", info["agent_url"])
        self.assertTrue(manager_utils.value_within_timeout(info["agent_last_heartbeat"], 60))
        self.assertEqual(states.AVAILABLE, self.node.provision_state)   # nothing started

    def test_ignored_with_fast_track_off(self):
        self.config(fast_track=False, group="deploy")
        self.heartbeat(states.AVAILABLE)
        self.assertNotIn("provision_ssh_address", self.info())
        self.assertNotIn("agent_last_heartbeat", self.info())

    def test_a_new_boot_replaces_what_a_powered_off_one_left(self):
        # Ironic's power off wiped agent_url and the token; our keys of that boot remain
        self.alive(agent_url=None)
        self.heartbeat(states.MANAGEABLE, url="https://192.0.2.21:2222")
        self.assertEqual("192.0.2.21", self.info()["provision_ssh_address"])
        self.assertEqual(2222, self.info()["provision_ssh_port"])
        self.assertEqual(1, self.info()["provision_heartbeats"])

    def test_another_address_for_the_same_boot_is_not_recorded(self):
        self.alive(agent_last_heartbeat=_iso(600))
        self.heartbeat(states.AVAILABLE, url="https://192.0.2.99:22")
        self.assertEqual("192.0.2.20", self.info()["provision_ssh_address"])

    def test_reusable_says_why_not(self):
        self.config(fast_track_timeout=30, group="deploy")
        self.alive(seconds_ago=31)
        with task_manager.acquire(self.context, self.node.uuid) as task:
            reuse, why = fast_track.reusable(task)
        self.assertFalse(reuse)
        self.assertIn("fast_track_timeout", why)
