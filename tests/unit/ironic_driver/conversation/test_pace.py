"""Which look waits, and for which share of the workers (pace.py; issue 52 item 8): a ramdisk
whose looks end at their deadline is looked at less often, last, in at most a quarter of the
workers, and never from its own heartbeats; it stops being slow by answering."""

import threading
import time
from types import SimpleNamespace
from unittest import mock

from ironic.conductor import task_manager

from ironic_driver.conversation import fanout, follow, heartbeat, pace, remote, ssh
from ironic_driver.deploy import sweep_order
from ironic_driver.document import sent
from tests.unit.ironic_driver import dbcase

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"
OPTS = SimpleNamespace(connect_timeout=10)


def test_a_look_that_ends_at_its_deadline_makes_the_node_slow_and_answers_undo_it():
    assert pace.after_look({}, True, deadline=True, o=OPTS) == {pace.SLOW: 2}
    # a ramdisk that accepted the connection and sat on it for connect_timeout
    assert pace.after_look({}, True, seconds=10.5, o=OPTS) == {pace.SLOW: 2}
    # a quick failure, or a machine that does not accept the connection (still booting)
    assert pace.after_look({}, True, seconds=0.2, o=OPTS) == {}
    assert pace.after_look({}, True, unreachable=True, seconds=10, o=OPTS) == {}
    assert pace.after_look({pace.SLOW: 2}, True, deadline=True, o=OPTS) == {pace.SLOW: 4}
    assert pace.after_look({pace.SLOW: 2}, False) == {pace.SLOW: 1}
    assert pace.after_look({pace.SLOW: 1}, False) == {pace.SLOW: None}
    assert pace.after_look({}, False) == {}


def test_a_slow_node_backs_off_up_to_a_cap():
    assert pace.wait({}, 10, 30) == 10
    assert pace.wait({pace.SLOW: 2}, 2, 30) == 8
    assert pace.wait({pace.SLOW: 20}, 2, 30) == 30
    assert pace.wait({pace.SLOW: 20}, 60, 30) == 60


def test_shares_of_the_workers():
    assert pace.shares(8) == {"starting": 6, "slow": 2}
    assert pace.shares(8, strained=False) == {"starting": 8, "slow": 2}
    assert pace.shares(1) == {"starting": 1, "slow": 1}


def test_a_slow_node_waits_its_back_off_even_when_hurried_and_comes_last():
    fan, now = fanout.FanOut(), time.monotonic()
    # slow ones wait 10 x 2^2 = 40 s (less than running_interval)
    fan._ended.update({"slow-30s": now - 30, "slow-50s": now - 50, "ok-15s": now - 15})
    fan.hurry("slow-30s")
    slow, ok = {"provision_phase": "wait_ramdisk", pace.SLOW: 2}, {"provision_phase": "running"}
    nodes = [("slow-30s", slow), ("slow-50s", slow), ("ok-15s", ok), ("ok-new", ok)]
    assert sweep_order(nodes, fan, interval=10, running_interval=60) == [
        ("ok-new", False, False), ("ok-15s", False, False), ("slow-50s", True, True)]


def test_a_tag_with_its_share_running_is_skipped_not_waited_for():
    fan, release, spawned = fanout.FanOut(), threading.Event(), []

    def spawn(func, *args):
        spawned.append(args[0])
        threading.Thread(target=func, args=args, daemon=True).start()
    shares = {"slow": 1}
    assert fan.submit("s1", spawn, release.wait, 5, limit=3, wait=5, tags={"slow"},
                      shares=shares)
    # no wait: the slot may go to the next node
    assert fan.submit("s2", spawn, release.wait, 5, limit=3, wait=5, tags={"slow"},
                      shares=shares) is False
    assert fan.submit("n1", spawn, release.wait, 5, limit=3, wait=5, shares=shares)
    with fan.claim("s3", 3, {"slow"}, shares) as mine:
        assert mine is False
    release.set()
    assert spawned == ["s1", "n1"]


class TestSlowLooks(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_bound_node(KEY, {"image_source": "http://x/img"})

    def _follow(self, **patches):
        with mock.patch.object(follow, "connect", **patches):
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                follow.follow(task, sent.for_ramdisk)
        self.node.refresh()
        return self.node.driver_internal_info

    def test_a_look_at_its_deadline_is_counted_and_an_answer_uncounts_it(self):
        self.deploy_waiting(provision_phase="running")
        with mock.patch.object(remote, "status", side_effect=ssh.LimitExceeded("70 s")), \
                mock.patch.object(follow.LOG, "disabled", False), \
                self.assertLogs(follow.LOG, "WARNING") as logs:
            info = self._follow(return_value=mock.Mock())
        self.assertEqual(2, info[pace.SLOW])
        self.assertIn("held a look", logs.output[0])
        with mock.patch.object(remote, "status", return_value={
                "exit_code": None, "events": [], "events_offset": 0, "tail": ""}):
            info = self._follow(return_value=mock.Mock())
        self.assertEqual(1, info[pace.SLOW])

    def test_a_machine_that_refuses_the_connection_is_not_slow(self):
        self.deploy_waiting()
        info = self._follow(side_effect=ssh.Unreachable("cannot connect: timed out"))
        self.assertNotIn(pace.SLOW, info)
        self.assertIn("Unreachable", info["provision_last_ssh_error"])

    def test_a_slow_ramdisks_heartbeat_brings_it_no_look(self):
        self.deploy_waiting(provision_phase="running", provision_ssh_address="192.0.2.20",
                            provision_ssh_port=22, provision_host_key=KEY,
                            provision_heartbeats=1, **{pace.SLOW: 4})
        with mock.patch.object(follow, "follow") as look, \
                mock.patch.object(heartbeat, "_recorded_within", return_value=True):
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                heartbeat._look_now(task, "the ramdisk says its job exited", sent.for_ramdisk)
        look.assert_not_called()
