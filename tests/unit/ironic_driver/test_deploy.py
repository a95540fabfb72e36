"""Unit tests on Ironic's own DB fixtures and task manager."""

import json
import os
import subprocess
import time
from unittest import mock

import pytest
from ironic.common import exception, states
from ironic.conductor import task_manager
from ironic.tests.unit.objects import utils as obj_utils

from ironic_driver import deploy, validation
from ironic_driver.conversation import remote
from ironic_driver.document import contract, sent
from tests.unit.ironic_driver import dbcase

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"


class TestWithNode(dbcase.NodeTestCase):
    def setUp(self):
        super().setUp()
        self.node = obj_utils.create_test_node(
            self.context, driver="fake-hardware", deploy_interface="provision",
            driver_info={"provision_ssh_address": "192.0.2.10",
                         "provision_host_key": HOST_KEY},
            instance_info={"image_source": "http://x/img", "root_gb": 10,
                           "provision_layout": {"version": 1}},
            properties={"root_device": {"serial": "s1"}, "capabilities": "boot_mode:uefi"})

    def test_document_is_the_contract(self):
        doc = json.loads(json.dumps(sent.payload(self.node, "ironic")))
        self.assertEqual({"node_uuid", "instance_info", "properties", "boot_mode", "secure_boot",
                          "rebuild", "layout"},
                         set(doc))
        self.assertFalse(doc["rebuild"])
        self.assertEqual(self.node.uuid, doc["node_uuid"])
        self.assertEqual("uefi", doc["boot_mode"])
        self.assertEqual({"root_device": {"serial": "s1"}}, doc["properties"])
        self.assertEqual({"version": 1}, doc["layout"])
        self.assertEqual(10, doc["instance_info"]["root_gb"])

    def test_document_without_hints_or_layout(self):
        self.node.properties = {}
        self.node.instance_info = {"image_source": "x", "deploy_boot_mode": "bios"}
        doc = contract.build(self.node)
        self.assertEqual({}, doc["properties"])
        self.assertNotIn("layout", doc)
        self.assertEqual("bios", doc["boot_mode"])

    def test_document_carries_skipped_disks_and_the_operators_choice_without_hints(self):
        """The ramdisk picks the root disk as Ironic does (the smallest of at least 4 GiB, never
        one of skip_block_devices) unless the operator asks for hints everywhere."""
        self.node.properties = {"skip_block_devices": [{"name": "/dev/sdb"}]}
        doc = contract.build(self.node)
        self.assertEqual({"skip_block_devices": [{"name": "/dev/sdb"}]}, doc["properties"])
        self.assertNotIn("root_device_default", doc)
        self.config(root_device_hints_required=True, group="provision_agent")
        self.assertEqual("refuse", contract.build(self.node)["root_device_default"])

    def test_properties_listed(self):
        props = deploy.ProvisionDeploy().get_properties()
        self.assertIn("Optional", props["provision_ssh_address"])
        self.assertIn("provision_host_key", props)

    def test_missing_key_file_is_a_clear_error(self):
        self.config(ssh_private_key_file="/nonexistent/key", group="provision_agent")
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    task.driver.deploy.validate, task)
        self.assertIn("/nonexistent/key does not exist", str(exc))

    def test_missing_address_and_unpinned_key(self):
        opts = deploy.OPTS()
        # No static address: the ramdisk must be told the API URL, which needs configuring.
        self.config(auth_strategy="noauth")
        self.config(endpoint_override=None, group="service_catalog")
        exc = self.assertRaises(exception.InvalidParameterValue, validation.check_driver_info,
                                {}, opts)
        self.assertIn("[service_catalog]endpoint_override", str(exc))
        self.config(endpoint_override="http://192.0.2.1:6385", group="service_catalog")
        self.assertEqual(22, validation.check_driver_info({}, opts))
        exc = self.assertRaises(exception.MissingParameterValue,
                                validation.check_driver_info,
                                {"provision_ssh_address": "a"}, opts)
        self.assertIn("pinned", str(exc))
        self.assertRaises(exception.InvalidParameterValue, validation.check_driver_info,
                          {"provision_ssh_address": "a", "provision_host_key": "junk"}, opts)

    def test_static_ssh_address(self):
        """An IPv6 one is taken as the heartbeat's are; a malformed one is refused with its
        place at validate, not at the first SSH attempt minutes after the boot."""
        opts, key = deploy.OPTS(), "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDH" \
            "mumCqAqb0cA1WYBMXuCCEYGo"
        for good in ("fd00::5", "FD00:0::5", "192.0.2.5", "ramdisk-1.example.org"):
            self.assertEqual(22, validation.check_driver_info(
                {"provision_ssh_address": good, "provision_host_key": key}, opts))
        for bad, said in (("[fd00::5]", "write an IPv6 address without brackets here"),
                          ("fd00::5::1", "'fd00::5::1' is not an IPv6 address"),
                          ("192.0.2.500", "'192.0.2.500' is not an IPv4 address")):
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    validation.check_driver_info,
                                    {"provision_ssh_address": bad, "provision_host_key": key},
                                    opts)
            self.assertIn("driver_info/provision_ssh_address: ", str(exc))
            self.assertIn(said, str(exc))

    def test_bad_timeouts(self, ):
        self.config(poll_interval=100, deploy_timeout=50, group="provision_agent")
        self.config(ssh_private_key_file=self._key(), group="provision_agent")
        exc = self.assertRaises(exception.InvalidParameterValue, validation.check_options,
                                deploy.OPTS())
        self.assertIn("must be smaller than [provision_agent]deploy_timeout (50)", str(exc))
        # unset, Ironic's callback timeouts are the limit
        self.config(deploy_timeout=None, group="provision_agent")
        self.config(clean_callback_timeout=90, group="conductor")
        exc = self.assertRaises(exception.InvalidParameterValue, validation.check_options,
                                deploy.OPTS())
        self.assertIn("must be smaller than [conductor]clean_callback_timeout (90)", str(exc))

    def _deploy_waiting(self, **internal):
        self.deploy_waiting(**internal)
        self.config(data_driver="native", group="provision_agent")

    def _follow(self, started, status):
        return self.follow_once(started, status)

    def test_follow_adopts_a_provision_already_running(self):
        self._deploy_waiting()
        start = self._follow(False, {"exit_code": None, "events_offset": 40, "tail": "",
                                     "events": [{"event": "wrapper", "status": "started"}]})
        self.assertEqual(1, start.call_count)
        info = self.node.driver_internal_info
        self.assertEqual("running", info["provision_phase"])
        self.assertEqual(40, info["provision_events_offset"])
        self.assertEqual(1, info["provision_events_count"])
        self.assertEqual(states.DEPLOYWAIT, self.node.provision_state)

    def test_a_poll_that_learns_nothing_does_not_save(self):
        self._deploy_waiting(provision_phase="running", provision_events_offset=40)
        before = self.node.updated_at
        with mock.patch.object(task_manager.TaskManager, "upgrade_lock") as upgrade:
            self._follow(True, {"exit_code": None, "events": [], "events_offset": 40,
                                "tail": ""})
        upgrade.assert_not_called()
        self.assertEqual(before, self.node.updated_at)

    def _validate(self, **instance_info):
        self.config(ssh_private_key_file=self._key(), group="provision_agent")
        self.node.instance_info = instance_info
        self.node.save()
        with task_manager.acquire(self.context, self.node.uuid) as task:
            task.driver.deploy.validate(task)

    def _key(self):
        # Ironic's test base forbids subprocesses: make the key in-process.
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
        key = os.path.join(self.useFixture(__import__("fixtures").TempDir()).path, "k")
        with open(key, "wb") as f:
            f.write(ed25519.Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption()))
        return key

    def test_validate_refuses_a_node_without_an_image(self):
        """After undeploy Ironic has emptied instance_info; a redeploy must be refused at
        validate, not a minute later in the ramdisk."""
        exc = self.assertRaises(exception.MissingParameterValue, self._validate)
        self.assertIn("instance_info/image_source is required", str(exc))
        self._validate(image_source="http://x/img", image_checksum="sha256:" + "0" * 64)

    def test_validate_with_native_needs_a_layout(self):
        self.config(data_driver="native", group="provision_agent")
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate,
                                image_source="http://x/img")
        self.assertIn("data_driver native needs instance_info/provision_layout", str(exc))

    def test_native_payload_needs_a_layout(self):
        self.node.instance_info = {"image_source": "x"}
        self.assertRaises(exception.InvalidParameterValue, sent.payload, self.node,
                          "native")


@pytest.mark.parametrize("data,events,used", [
    (b'{"event": "a"}\n{"event": "b"}\n', ["a", "b"], 30),
    (b'{"event": "a"}\n{"event": "b', ["a"], 15),
    (b"not json\n", ["unparsed"], 9),
])
def test_parse_events_keeps_partial_lines_for_later(data, events, used):
    got, n = remote.parse_events(data)
    assert [e["event"] for e in got] == events
    assert n == used


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_start_command_returns_while_provision_runs(tmp_path, shell):
    """sshd runs the command with the login shell (bash for root on Debian) and closes the
    session only when nothing holds its stdout any more: the start command must return at
    once although provision keeps running. Under bash it once waited for provision."""
    directory = tmp_path / "p dir"
    directory.mkdir()
    fake = tmp_path / "fake provision"
    fake.write_text('#!/bin/sh\necho "args: $*"\nsleep 3\nexit 7\n')
    fake.chmod(0o755)
    cmd = remote.start_command(str(directory),
                               remote.provision_argv(str(fake), "ironic", ["--debug"]))
    done = subprocess.run([shell, "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=10)
    # returned while the fake (3 s) still runs: no exit code recorded yet
    assert done.returncode == 0
    assert not (directory / remote.EXIT_CODE).exists()
    deadline = time.monotonic() + 10
    while not (directory / remote.EXIT_CODE).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (directory / remote.EXIT_CODE).read_text().strip() == "7"
    events, _ = remote.parse_events((directory / remote.EVENTS).read_bytes())
    assert [e["status"] for e in events] == ["started", "exited"]
    assert events[1]["exit_code"] == 7
    output = (directory / remote.OUTPUT).read_text()
    assert "--data_driver ironic" in output and "--debug" in output


def test_start_command_fails_without_its_directory(tmp_path):
    cmd = remote.start_command(str(tmp_path / "missing"),
                               remote.provision_argv("/bin/true", "ironic"))
    assert subprocess.run(["sh", "-c", cmd], capture_output=True, timeout=10).returncode != 0


def _sh(command):
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=10)


def test_a_second_start_finds_provision_running_and_leaves_it_alone(tmp_path):
    """A start whose progress was not saved is retried on the next poll: it must not wipe the
    running provision's files nor start a second provision on the same disks."""
    directory, runs = tmp_path / "d", tmp_path / "runs"
    fake = tmp_path / "fake"
    fake.write_text(f'#!/bin/sh\necho run >>{runs}\nsleep 2\nexit 0\n')
    fake.chmod(0o755)
    assert _sh(remote.prepare_command(str(directory))).stdout == ""
    command = remote.provision_argv(str(fake), "ironic")
    assert _sh(remote.start_command(str(directory), command)).returncode == 0
    deadline = time.monotonic() + 5
    while not runs.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    again = _sh(remote.prepare_command(str(directory)))
    assert again.returncode == 0 and again.stdout.strip() == remote.RUNNING
    assert (directory / remote.EVENTS).exists()          # its files are untouched
    deadline = time.monotonic() + 10
    while not (directory / remote.EXIT_CODE).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    deadline = time.monotonic() + 5                      # the wrapper lets go of the lock
    after = _sh(remote.prepare_command(str(directory)))
    while after.stdout and time.monotonic() < deadline:
        time.sleep(0.1)
        after = _sh(remote.prepare_command(str(directory)))
    assert after.returncode == 0 and after.stdout == ""
    assert not (directory / remote.EXIT_CODE).exists()   # a finished run is cleared
    assert runs.read_text() == "run\n"
