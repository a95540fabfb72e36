"""Ironic's database test case, fitted for pytest and for nodes of our deploy interface."""

import time
from unittest import mock

from ironic.common import states
from ironic.conductor import task_manager
from ironic.tests.unit.db import base as db_base
from ironic.tests.unit.objects import utils as obj_utils

# deploy: importing it registers [provision_agent] in Ironic's CONF (test_writes.py alone)
from ironic_driver import deploy  # noqa: F401
from ironic_driver.conversation import fanout, follow, remote
from ironic_driver.document import sent

API_URL = "http://192.0.2.1:6385"


class NodeTestCase(db_base.DbTestCase):
    def _clear_attrs(self):
        # Ironic's base class empties the instance for stestr; pytest then cannot remove the
        # test method it bound there. Clearing only non-test attributes keeps both happy.
        for key in [k for k in self.__dict__ if k[0] != "_" and not k.startswith("test_")]:
            del self.__dict__[key]

    def setUp(self):
        super().setUp()
        self.config(enabled_deploy_interfaces=["provision", "fake"])
        self.config(enabled_raid_interfaces=["provision", "fake", "no-raid"])
        # the ipa-api-url a ramdisk is given ([service_catalog]endpoint_override)
        self.config(endpoint_override=API_URL, group="service_catalog")
        # The conductor's pollers remember when they last looked at a node (by UUID, and the
        # fixtures reuse UUIDs): each test starts with none.
        fanout.FOLLOWERS.keep_only([])
        self.addCleanup(fanout.FOLLOWERS.keep_only, [])

    def recording_start(self):
        """A stand-in for remote.start that checks the binding it is given before it sends
        anything, as the real one does (tested on a shell in test_one_command_start.py), and
        records each command it would send in self.sent."""
        self.sent = []

        def start(session, directory, text, command, job=None, keyring=None, bound=None):
            if bound is not None:
                remote.verify_binding(session, *bound)
            self.sent.append(command)
            return True
        return start

    def make_node(self, **fields):
        fields.setdefault("network_interface", "noop")
        return obj_utils.create_test_node(self.context, driver="fake-hardware",
                                          deploy_interface="provision", **fields)

    def make_bound_node(self, host_key, instance_info=None):
        """A node whose ramdisk heartbeated from 192.0.2.10 with host_key (the binding the
        conversation checks); a native layout unless instance_info says otherwise."""
        if instance_info is None:
            self.config(data_driver="native", group="provision_agent")
            instance_info = {"provision_layout": {"version": 1}}
        return self.make_node(driver_info={"provision_ssh_address": "192.0.2.10",
                                           "provision_host_key": host_key},
                              instance_info=instance_info)

    def deploy_waiting(self, **internal):
        """self.node in deploy wait, its provision job at phase wait_ramdisk unless internal
        says otherwise (driver_internal_info keys with their provision_ prefix)."""
        self.node.provision_state = states.DEPLOYWAIT
        self.node.target_provision_state = states.ACTIVE
        # what Ironic records while our deploy step waits
        self.node.deploy_step = {"interface": "deploy", "step": "deploy", "priority": 100,
                                 "args": {}}
        info = {"provision_phase": "wait_ramdisk", "provision_started_at": time.time(),
                "provision_events": [], "provision_events_count": 0,
                "provision_events_offset": 0}
        info.update(internal)
        self.node.driver_internal_info = info
        self.node.save()

    def follow_once(self, started, status):
        """One follow.follow() of self.node with SSH faked: the ramdisk proves its binding,
        remote.start returns started, remote.status returns status. Returns the mock of
        remote.start."""
        with mock.patch.object(follow, "connect", return_value=mock.Mock()), \
                mock.patch.object(remote, "verify_binding"), \
                mock.patch.object(remote, "start", return_value=started) as start, \
                mock.patch.object(remote, "status", return_value=status):
            with task_manager.acquire(self.context, self.node.uuid, shared=True) as task:
                follow.follow(task, sent.for_ramdisk)
        self.node.refresh()
        return start
