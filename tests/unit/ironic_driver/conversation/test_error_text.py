"""Text a ramdisk, a registry or a BMC sends, as the conductor keeps it (issue 52, items 7, 9
and 17): every error it stores in the node or logs goes through report.bounded, cut to a size
and without terminal control characters, and an SFTP server that breaks the protocol is
refused instead of raising on every look until the deploy times out."""

import datetime
import logging
import time
from unittest import mock

import pytest
from ironic.common import states
from ironic.conductor import task_manager
from oslo_utils import timeutils

from ironic_driver import report
from ironic_driver.conversation import follow, remote, ssh
from ironic_driver.document import sent
from tests.unit.ironic_driver import dbcase

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"
ESCAPES = "\x1b[2J\x1b[31m\x1b]0;owned\x07"
HUGE = ESCAPES + "A" * (8 << 20)     # an SFTP status message as a hostile server sends it


def _clean_and_small(text, limit):
    assert len(text) <= limit + 100, len(text)
    assert "\x1b" not in text and "\x07" not in text and "owned" not in text, text[:200]


def test_bounded_cuts_cleans_and_says_how_much_there_was():
    kept = report.bounded(OSError(HUGE))
    _clean_and_small(kept, report.ERROR_CHARS)
    assert kept.startswith("AAAA") and f"{len(HUGE)} characters in all" in kept
    assert report.bounded("short \x1b[1mtext\x1b[0m\nline two") == "short text\nline two"
    assert report.bounded(None) == "None"


class TestStoredErrors(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_bound_node(KEY)

    def _follow(self, session):
        with mock.patch.object(follow, "connect", return_value=session):
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                follow.follow(task, sent.for_ramdisk)
        self.node.refresh()

    def test_an_sftp_status_message_of_any_size_is_kept_cut_and_clean(self):
        self.deploy_waiting()
        with mock.patch.object(remote, "start", side_effect=OSError(HUGE)):
            self._follow(mock.Mock())
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)
        _clean_and_small(self.node.driver_internal_info["provision_last_ssh_error"],
                         report.ERROR_CHARS)

    def test_a_connection_error_of_any_size_is_kept_cut_and_clean(self):
        self.deploy_waiting()
        with mock.patch.object(follow, "connect", side_effect=ssh.paramiko.SSHException(
                'Indecipherable protocol version "' + HUGE + '"')):
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                follow.follow(task, sent.for_ramdisk)
        self.node.refresh()
        _clean_and_small(self.node.driver_internal_info["provision_last_ssh_error"],
                         report.ERROR_CHARS)

    def test_the_timeout_quotes_the_last_ssh_error_cut_and_clean(self):
        # as a conductor before this fix stored it
        self.config(deploy_timeout=600, group="provision_agent")
        self.deploy_waiting(provision_phase="running",
                            provision_last_ssh_error="OSError: " + HUGE)
        self.node.provision_updated_at = timeutils.utcnow() - datetime.timedelta(seconds=601)
        self.node.save()
        self._follow(mock.Mock())
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("last SSH error: OSError: AAAA", self.node.last_error)
        _clean_and_small(self.node.last_error, report.MESSAGE_CHARS)

    def _session(self, error):
        """A real ssh.Session whose SFTP answers every open with error."""
        client = mock.Mock()
        client.open_sftp.return_value.open.side_effect = error
        session = ssh.Session(client, mock.Mock(), 60, time.monotonic())
        self.addCleanup(session.close)
        return session

    def test_a_garbage_sftp_packet_refuses_the_ramdisk(self):
        self.deploy_waiting(provision_phase="running")
        self._follow(self._session(ssh.paramiko.sftp.SFTPError("Garbage packet received")))
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("refusing the ramdisk at 192.0.2.10 port 22: its SFTP server broke the "
                      "protocol (SFTPError: Garbage packet received)", self.node.last_error)

    def test_an_sftp_message_that_is_not_utf8_refuses_the_ramdisk(self):
        self.deploy_waiting(provision_phase="running")
        self._follow(self._session(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid")))
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("SFTP server broke the protocol (UnicodeDecodeError", self.node.last_error)

    def test_a_heartbeat_url_is_an_address_and_port_only(self):
        self.deploy_waiting()
        with mock.patch.object(follow, "follow"):
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                task.driver.deploy.heartbeat(task, "https://192.0.2.20:22/" + HUGE, "1.0")
        self.node.refresh()
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        self.assertIn("does not name an IP address and port alone", self.node.last_error)
        self.assertNotIn("agent_url", self.node.driver_internal_info)
        self.assertNotIn("\x1b", self.node.last_error)
        self.assertLess(len(self.node.last_error), 1000)


@pytest.mark.parametrize("name", ["paramiko.transport", "paramiko.transport.sftp"])
def test_paramiko_logs_what_the_server_sent_cut_and_clean(name, caplog, monkeypatch):
    # (Ironic's database fixture disables the loggers that exist when it runs its migrations)
    monkeypatch.setattr(logging.getLogger(name), "disabled", False)
    caplog.set_level(logging.ERROR, logger="paramiko")
    logging.getLogger(name).error("Exception (client): " + HUGE)
    logging.getLogger(name).error("Banner: %s", HUGE)
    assert len(caplog.records) == 2
    for record in caplog.records:
        _clean_and_small(record.getMessage(), report.LOG_CHARS)


# what provision printed and put in its `result` event when an image write met a disk's
# I/O error (docs/reliability.md, the e2e-faults run): one line naming disk, step and kernel
FAULT = ("I/O error on disk /dev/vdb during step 9/12 (write_image: raw image "
         "http://10.0.2.2:8080/data.img to /dev/vdb1): the kernel logged: I/O error, dev vdb, "
         "sector 20992 op 0x1:(WRITE) flags 0x8800 phys_seg 254 prio class 2. The disk fails "
         "I/O: replace it, or leave it out of the layout. Provision stopped there: nothing "
         "more was written to any disk, what it mounted was unmounted and the arrays and "
         "volume groups it brought up were stopped. The step's own error: writing /dev/vdb1 "
         "at byte 8388608 failed: Input/output error")
TAIL = ("2026-11-29 05:10:01,123 ERROR provision_agent.run.executor: step 9/12 (write_image) "
        "failed after 3.1s\nprovision: error: " + FAULT)


def test_a_disk_fault_is_the_first_line_of_last_error_whole():
    result = {"event": "result", "status": "failed", "exit_code": 4, "message": FAULT}
    text = report.failed_text(4, [{"event": "step"}, result, {"event": "wrapper"}], TAIL)
    first, rest = text.split("\n", 1)
    assert first == "provision exited with 4: " + FAULT
    assert rest.startswith("last output:\n2026-11-29")
    # without the event (a look that read it before the exit code), the output's line says it
    assert report.failed_text(4, [], TAIL).split("\n", 1)[0] == first
    # a multi-line message is made one line; control characters are dropped; size bounded
    odd = dict(result, message="invalid input (2):\n  - $.a: x\n  - $.b: \x1b[31my" + "z" * 9000)
    first = report.failed_text(2, [odd], "").split("\n", 1)[0]
    assert first.startswith("provision exited with 2: invalid input (2): - $.a: x - $.b: yzz")
    assert "\x1b" not in first and len(first) < report.WHY_CHARS + 100
    assert report.failed_text(1, [], "Traceback ...\nprovision: unexpected error: KeyError: 'x'"
                              " (run with --debug for a traceback)").startswith(
        "provision exited with 1: unexpected error: KeyError: 'x' (run with --debug")
    assert report.failed_text(4, [], "nothing said").startswith(
        "provision exited with 4\nlast output:\nnothing said")


class TestExitReason(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = self.make_bound_node(KEY)

    def test_a_disk_fault_lands_in_last_error_as_one_line_naming_disk_step_and_kernel(self):
        self.deploy_waiting(provision_phase="running")
        result = {"event": "result", "status": "failed", "exit_code": 4, "message": FAULT}
        self.follow_once(False, {"exit_code": 4, "events": [result], "events_offset": 900,
                                 "tail": TAIL})
        self.assertEqual(states.DEPLOYFAIL, self.node.provision_state)
        first = self.node.last_error.split("\n")[0]
        self.assertEqual("provision exited with 4: " + FAULT, first)
        for said in ("disk /dev/vdb", "step 9/12 (write_image", "I/O error, dev vdb, sector"):
            self.assertIn(said, first)
