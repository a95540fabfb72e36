"""What the conductor believes of a ramdisk, on Ironic's DB fixtures: a ramdisk found through a
heartbeat is sent nothing until it proves its binding to the node; what a ramdisk writes into
the node's record (events, the output tail, the exit code) is bounded and cleaned."""

import json
import time
from unittest import mock

from ironic.common import states
from ironic.conductor import task_manager

from ironic_driver import report
from ironic_driver.conversation import follow, remote, ssh
from ironic_driver.document import sent
from tests.unit.ironic_driver import dbcase

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"
RUNNING = {"exit_code": None, "events": [], "events_offset": 0, "tail": ""}


class TestBinding(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_node(driver_info={},
                                   instance_info={"image_source": "http://x/img"})

    def _follow(self, verify):
        """remote.start as recording_start (self.sent: the commands it sent)."""
        start = self.recording_start()
        with mock.patch.object(follow, "connect", return_value=mock.Mock()), \
                mock.patch.object(remote, "verify_binding", side_effect=verify) as check, \
                mock.patch.object(remote, "start", side_effect=start) as start, \
                mock.patch.object(remote, "status", return_value=RUNNING):
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                follow.follow(task, sent.for_ramdisk)
        self.node.refresh()
        return check, start

    def test_a_reported_ramdisk_without_this_nodes_binding_is_sent_nothing(self):
        self.deploy_waiting(provision_ssh_address="192.0.2.66", provision_ssh_port=22,
                            provision_host_key=KEY, agent_secret_token="token-of-a")
        check, start = self._follow(remote.BadRamdisk(
            "it is not the ramdisk that looked up node X: its binding file names another node"))
        check.assert_called_once_with(mock.ANY, "/run/provision-ironic-agent",
                                      self.node.uuid, "token-of-a")
        self.assertEqual([], self.sent)
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("refusing the ramdisk at 192.0.2.66 port 22", self.node.last_error)
        self.assertIn("names another node", self.node.last_error)
        self.assertNotIn("token-of-a", self.node.last_error)

    def test_a_reported_ramdisk_that_proves_its_binding_gets_the_job(self):
        self.deploy_waiting(provision_ssh_address="192.0.2.20", provision_ssh_port=22,
                            provision_host_key=KEY, agent_secret_token="token-of-a")
        check, start = self._follow(None)
        check.assert_called_once()
        start.assert_called_once()
        self.assertEqual(1, len(self.sent))
        self.assertEqual("running", self.node.driver_internal_info["provision_phase"])

    def test_a_static_address_is_the_operators_binding(self):
        self.node.driver_info = {"provision_ssh_address": "192.0.2.10",
                                 "provision_host_key": KEY}
        self.node.save()
        self.deploy_waiting()
        check, start = self._follow(AssertionError("not to be asked"))
        check.assert_not_called()
        start.assert_called_once()
        self.assertIsNone(start.call_args.kwargs["bound"])


class TestHostileOutput(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_bound_node(KEY, {"image_source": "http://x/img"})

    def test_events_of_any_size_keep_the_record_small(self):
        self.deploy_waiting(provision_phase="running")
        huge = [{"event": "step", "index": i, "status": "start", "x": "y" * (1 << 20)}
                for i in range(20)]
        self.follow_once(True, {"exit_code": None, "events": huge, "events_offset": 21 << 20,
                                "tail": ""})
        kept = self.node.driver_internal_info["provision_events"]
        self.assertLessEqual(len(json.dumps(kept)), report.EVENTS_BYTES + 1024)
        self.assertEqual(list(range(20))[-len(kept):], [e["index"] for e in kept])
        self.assertTrue(all(e["truncated_bytes"] > 1 << 20 for e in kept))
        self.assertEqual(20, self.node.driver_internal_info["provision_events_count"])
        self.assertLess(len(json.dumps(self.node.driver_internal_info)), 64 * 1024)

    def test_the_output_tail_reaches_last_error_without_terminal_escapes(self):
        self.deploy_waiting(provision_phase="running")
        tail = ("\x1b[2J\x1b[31mERROR\x1b[0m: disk /dev/vdz not found\x07\n"
                "\x1b]0;owned\x07" + "z" * 100000)
        self.follow_once(True, {"exit_code": 3, "events": [], "events_offset": 0,
                                "tail": tail})
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("ERROR: disk /dev/vdz not found", self.node.last_error)
        self.assertNotIn("\x1b", self.node.last_error)
        self.assertNotIn("\x07", self.node.last_error)
        self.assertNotIn("owned", self.node.last_error)
        self.assertLess(len(self.node.last_error), report.TAIL_CHARS + 600)

    def test_an_exit_code_that_is_not_one_fails_at_once(self):
        self.deploy_waiting(provision_phase="running")
        session = mock.Mock()
        # what remote.status reads through the session: a hook's junk where the code goes
        session.read.side_effect = lambda path, offset, limit: (
            b"\x1b[31mowned" if path.endswith(remote.EXIT_CODE) else b"")
        with mock.patch.object(follow, "connect", return_value=session):
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                follow.follow(task, sent.for_ramdisk)
        session.close.assert_called_once()
        self.node.refresh()
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("not an exit code", self.node.last_error)
        self.assertNotIn("\x1b", self.node.last_error)

    def test_a_ramdisk_past_the_look_deadline_is_only_recorded(self):
        self.deploy_waiting(provision_phase="running")
        with mock.patch.object(follow, "connect", return_value=mock.Mock()), \
                mock.patch.object(remote, "status", side_effect=ssh.LimitExceeded(
                    "the ramdisk did not finish answering within 70 s")):
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                follow.follow(task, sent.for_ramdisk)
        self.node.refresh()
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)
        self.assertIn("within 70 s", self.node.driver_internal_info["provision_last_ssh_error"])


def test_clean_text_removes_sequences_whole_and_keeps_lines():
    assert report.clean_text("a\x1b[1;31mb\x1b[0m\tc\nd\x1b]2;t\x07e\x9bf") == "ab\tc\nde" + "f"


def test_a_cut_event_keeps_what_identifies_it():
    event = {"event": "step", "index": 3, "kind": "image", "status": "start",
             "description": "d" * 5000, "time": time.time()}
    kept = report.bound_event(event)
    assert kept["index"] == 3 and kept["kind"] == "image" and "description" not in kept
    assert kept["truncated_bytes"] > 5000
    assert report.bound_event({"event": "x"}) == {"event": "x"}
