"""Unit tests on Ironic's own DB fixtures and task manager."""

import json
import os
import subprocess
import time

import pytest
from ironic.common import exception
from ironic.conductor import task_manager
from ironic.tests.unit.db import base as db_base
from ironic.tests.unit.objects import utils as obj_utils

from ironic_driver import deploy, document, remote, validation

HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo"


class TestWithNode(db_base.DbTestCase):
    def _clear_attrs(self):
        # Ironic's base class empties the instance for stestr; pytest then cannot remove the
        # test method it bound there. Clearing only non-test attributes keeps both happy.
        for key in [k for k in self.__dict__ if k[0] != "_" and not k.startswith("test_")]:
            del self.__dict__[key]

    def setUp(self):
        super().setUp()
        self.config(enabled_deploy_interfaces=["provision", "fake"])
        self.node = obj_utils.create_test_node(
            self.context, driver="fake-hardware", deploy_interface="provision",
            driver_info={"provision_ssh_address": "192.0.2.10",
                         "provision_host_key": HOST_KEY},
            instance_info={"image_source": "http://x/img", "root_gb": 10,
                           "provision_layout": {"version": 1}},
            properties={"root_device": {"serial": "s1"}, "capabilities": "boot_mode:uefi"})

    def test_document_is_the_contract(self):
        doc = json.loads(document.serialise(self.node))
        self.assertEqual({"node_uuid", "instance_info", "properties", "boot_mode", "layout"},
                         set(doc))
        self.assertEqual(self.node.uuid, doc["node_uuid"])
        self.assertEqual("uefi", doc["boot_mode"])
        self.assertEqual({"root_device": {"serial": "s1"}}, doc["properties"])
        self.assertEqual({"version": 1}, doc["layout"])
        self.assertEqual(10, doc["instance_info"]["root_gb"])

    def test_document_without_hints_or_layout(self):
        self.node.properties = {}
        self.node.instance_info = {"image_source": "x", "deploy_boot_mode": "bios"}
        doc = document.build(self.node)
        self.assertEqual({}, doc["properties"])
        self.assertNotIn("layout", doc)
        self.assertEqual("bios", doc["boot_mode"])

    def test_properties_listed(self):
        props = deploy.ProvisionDeploy().get_properties()
        self.assertIn("Required", props["provision_ssh_address"])
        self.assertIn("provision_host_key", props)

    def test_missing_key_file_is_a_clear_error(self):
        self.config(ssh_private_key_file="/nonexistent/key", group="provision_agent")
        with task_manager.acquire(self.context, self.node.uuid) as task:
            exc = self.assertRaises(exception.InvalidParameterValue,
                                    task.driver.deploy.validate, task)
        self.assertIn("/nonexistent/key does not exist", str(exc))

    def test_missing_address_and_unpinned_key(self):
        opts = deploy.OPTS()
        self.assertRaises(exception.MissingParameterValue, validation.check_driver_info,
                          {}, opts)
        exc = self.assertRaises(exception.MissingParameterValue,
                                validation.check_driver_info,
                                {"provision_ssh_address": "a"}, opts)
        self.assertIn("pinned", str(exc))
        self.assertRaises(exception.InvalidParameterValue, validation.check_driver_info,
                          {"provision_ssh_address": "a", "provision_host_key": "junk"}, opts)

    def test_bad_timeouts(self, ):
        self.config(poll_interval=100, deploy_timeout=50, group="provision_agent")
        key = os.path.join(self.useFixture(__import__("fixtures").TempDir()).path, "k")
        import paramiko
        paramiko.Ed25519Key  # noqa: B018 (only checks the import)
        os.system(f"ssh-keygen -q -t ed25519 -N '' -f {key}")
        self.config(ssh_private_key_file=key, group="provision_agent")
        exc = self.assertRaises(exception.InvalidParameterValue, validation.check_options,
                                deploy.OPTS())
        self.assertIn("must be smaller than deploy_timeout (50)", str(exc))

    def test_native_payload_needs_a_layout(self):
        self.node.instance_info = {"image_source": "x"}
        self.assertRaises(exception.InvalidParameterValue, validation.payload, self.node,
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
    cmd = remote.start_command(str(directory), str(fake), "ironic", ["--debug"])
    t0 = time.monotonic()
    done = subprocess.run([shell, "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=10)
    assert done.returncode == 0 and time.monotonic() - t0 < 2
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
    cmd = remote.start_command(str(tmp_path / "missing"), "/bin/true", "ironic")
    assert subprocess.run(["sh", "-c", cmd], capture_output=True, timeout=10).returncode != 0
