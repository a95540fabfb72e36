"""The polls record progress a few threads at a time (ironic_driver.conversation.record.WRITER),
and a look at a node always gives its turn back."""

import threading
import time
from unittest import mock

import pytest
from ironic.common import states
from ironic.conductor import deployments, task_manager
from ironic.objects import node as node_object

from ironic_driver.conversation import follow, record, remote
from ironic_driver.conversation import turns as turns_mod
from ironic_driver.document import sent
from tests.unit.ironic_driver import dbcase

RUNNING = {"exit_code": None, "events_offset": 40, "tail": "",
           "events": [{"event": "wrapper", "status": "started"}]}


@pytest.mark.parametrize("turns", [1, 3])
def test_no_more_writers_than_turns_and_a_thread_may_enter_twice(turns):
    writer, guard, inside, most, done = turns_mod.Writer(turns), threading.Lock(), [0], [0], []

    def record(i):
        writer.enter()
        writer.enter()      # a save, then a failure, in the same look
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.05)    # widens the window in which one writer too many would show
        with guard:
            inside[0] -= 1
        done.append(i)
        writer.leave()

    threads = [threading.Thread(target=record, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(done) == list(range(8))
    assert 1 <= most[0] <= turns
    assert _free(writer)


def test_as_many_writers_as_turns_get_in_together():
    writer, meet = turns_mod.Writer(3), threading.Barrier(3, timeout=10)
    passed = []

    def record():
        writer.enter()
        try:
            meet.wait()     # broken (and raising) unless all three are in at once
            passed.append(1)
        finally:
            writer.leave()

    threads = [threading.Thread(target=record) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert len(passed) == 3


def _free(writer):
    """True when no thread holds the writer (checked from a thread of its own)."""
    result = []
    t = threading.Thread(target=lambda: result.append(writer._lock.acquire(blocking=False)))
    t.start()
    t.join(5)
    if result[0]:
        writer._lock.release()
    return result[0]


class TestWrites(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_node(
            driver_info={"provision_ssh_address": "192.0.2.10"},
            instance_info={"image_source": "http://x/img", "provision_layout": {"version": 1}})
        self.config(data_driver="native", group="provision_agent")

    def test_a_start_is_recorded_and_the_turn_given_back(self):
        self.deploy_waiting()
        with mock.patch.object(record.WRITER, "enter", wraps=record.WRITER.enter) as enter:
            self.follow_once(True, RUNNING)
        enter.assert_called()
        self.assertEqual("running", self.node.driver_internal_info["provision_phase"])
        self.assertTrue(_free(record.WRITER))

    def test_a_finished_provision_resumes_and_gives_the_turn_back(self):
        self.deploy_waiting(provision_phase="running", provision_events_offset=40)
        with mock.patch("ironic.conductor.utils.notify_conductor_resume_deploy") as resume:
            self.follow_once(True, {"exit_code": 0, "events_offset": 80, "tail": "",
                                    "events": [{"event": "wrapper", "status": "exited"}]})
        resume.assert_called_once()
        self.assertEqual("done", self.node.driver_internal_info["provision_phase"])
        self.assertTrue(_free(record.WRITER))

    def test_a_finished_provision_resumes_on_the_lock_it_holds(self):
        self.deploy_waiting(provision_phase="running", provision_events_offset=40)
        spawn = mock.Mock()
        exited = {"exit_code": 0, "events_offset": 80, "tail": "",
                  "events": [{"event": "wrapper", "status": "exited"}]}
        with mock.patch.object(follow, "connect", return_value=mock.Mock()), \
                mock.patch.object(remote, "status", return_value=exited), \
                mock.patch("ironic.conductor.utils.notify_conductor_resume_deploy") as rpc:
            follow.follow_in_worker(self.context, self.node.uuid, sent.for_ramdisk, spawn)
        rpc.assert_not_called()
        spawn.assert_called_once_with(deployments.continue_node_deploy, mock.ANY)
        task = spawn.call_args[0][1]
        self.assertFalse(task.shared)       # the worker gets the lock with the task
        self.node.refresh()
        self.assertEqual(states.DEPLOYING, self.node.provision_state)
        info = self.node.driver_internal_info
        self.assertEqual(("done", 0, 80), (info["provision_phase"], info["provision_exit_code"],
                                           info["provision_events_offset"]))
        self.assertTrue(_free(record.WRITER))

    def test_a_save_that_fails_still_gives_the_turn_back(self):
        self.deploy_waiting()
        with mock.patch.object(node_object.Node, "save", side_effect=RuntimeError("db gone")):
            with pytest.raises(RuntimeError):
                self.follow_once(True, RUNNING)
        self.assertTrue(_free(record.WRITER))

    def test_a_poll_that_learns_nothing_does_not_wait_for_a_turn(self):
        self.deploy_waiting(provision_phase="running", provision_events_offset=40)
        with mock.patch.object(record.WRITER, "enter") as enter:
            self.follow_once(True, {"exit_code": None, "events": [], "events_offset": 40,
                                    "tail": ""})
        enter.assert_not_called()


def test_paramiko_handshake_debug_is_quieted_unless_the_operator_set_a_level():
    import logging

    from ironic_driver.conversation import ssh
    unset = logging.getLogger("provision-test.unset")
    ssh.quiet_paramiko(unset)
    assert unset.level == logging.WARNING
    chosen = logging.getLogger("provision-test.chosen")
    chosen.setLevel(logging.DEBUG)
    ssh.quiet_paramiko(chosen)
    assert chosen.level == logging.DEBUG


class TestSlowRamdisks(dbcase.NodeTestCase):
    """Three ramdisks that are slow to answer SSH (as many turns as the writer has) must not
    keep a fourth node's progress from being recorded."""

    def setUp(self):
        super().setUp()
        self.config(data_driver="native", group="provision_agent")
        self.slow = [self.make_node(uuid=f"00000000-0000-4000-8000-00000000000{i}",
                                    name=f"slow-{i}", driver_info={},
                                    instance_info={"provision_layout": {"version": 1}})
                     for i in range(record.WRITER._lock._initial_value)]
        self.node = self.make_node(uuid="00000000-0000-4000-8000-0000000000ff", name="other",
                                   driver_info={"provision_ssh_address": "192.0.2.10"},
                                   instance_info={"provision_layout": {"version": 1}})
        for node in self.slow + [self.node]:
            self.node = node
            self.deploy_waiting()

    def test_a_heartbeat_holds_no_turn_while_its_ramdisk_is_slow(self):
        # The threads touch the database one at a time (the fixture's sqlite is one
        # connection): each heartbeat records, then sits in its SSH; the fourth node's poll
        # records while all three sit there; then they are let go one by one.
        inside, release = threading.Semaphore(0), {n.uuid: threading.Event() for n in self.slow}
        other = self.node.uuid

        def connect(node, target, o):
            if node.uuid == other:
                return mock.Mock()
            inside.release()
            release[node.uuid].wait(60)         # a ramdisk that takes its time
            raise OSError("the ramdisk went away")

        def heartbeat(uuid):
            with task_manager.acquire(self.context, uuid, shared=True) as task:
                task.driver.deploy.heartbeat(task, "https://192.0.2.20:22", "1.0", None)

        recorded = threading.Event()

        def poll_other():
            with task_manager.acquire(self.context, other, shared=True) as task:
                follow.follow(task, sent.for_ramdisk)
            recorded.set()

        with mock.patch.object(follow, "connect", side_effect=connect), \
                mock.patch.object(remote, "verify_binding"), \
                mock.patch.object(remote, "start", return_value=True), \
                mock.patch.object(remote, "status", return_value=RUNNING):
            slow = []
            for node in self.slow:
                slow.append(threading.Thread(target=heartbeat, args=(node.uuid,)))
                slow[-1].start()
                self.assertTrue(inside.acquire(timeout=30))     # in its SSH now
            poll = threading.Thread(target=poll_other)
            poll.start()
            done = recorded.wait(20)
            poll.join(60)
            for node, thread in zip(self.slow, slow):
                release[node.uuid].set()
                thread.join(60)
        self.assertTrue(done, "the other node's progress waited for the slow ramdisks")
        self.node.refresh()
        self.assertEqual("running", self.node.driver_internal_info["provision_phase"])
        # what the start recorded (its first events are the next look's: follow.py)
        self.assertIn("start",
                      self.node.driver_internal_info["provision_start_timings"])
        self.assertTrue(_free(record.WRITER))

    def test_waiting_for_a_turn_is_bounded(self):
        writer = turns_mod.Writer(1, wait=0.2)
        holder = threading.Thread(target=writer.enter)
        holder.start()
        holder.join(5)
        self.assertFalse(writer.enter())        # none freed in time: go on without one
        writer.leave()                          # and leaving without one frees nothing
        self.assertFalse(_free(writer))
