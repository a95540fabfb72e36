"""The periodic sweep that hands waiting nodes to pollers, on Ironic's DB fixtures: it picks
exactly our waiting nodes and takes no lock itself (each poll takes its own)."""

import time
from unittest import mock

from ironic.common import states
from ironic.conductor import task_manager
from ironic.db import api as dbapi
from oslo_utils import uuidutils

from ironic_driver import deploy
from ironic_driver.conversation import follow
from tests.unit.ironic_driver import dbcase


class Manager:
    """The two things the sweep uses of Ironic's conductor manager."""

    def __init__(self):
        self.spawned = []
        self.dbapi = dbapi.get_instance()

    def iter_nodes(self, fields=None, filters=None):
        # the hash ring that maps nodes to conductors is not what is tested here
        return iter(self.dbapi.get_nodeinfo_list(
            columns=["uuid", "driver", "conductor_group"] + list(fields or ()),
            filters=filters))

    def _spawn_worker(self, func, *args):
        self.spawned.append(args[0])    # FanOut hands on (its runner, key, the poll, ...)


class TestSweep(dbcase.NodeTestCase):
    def _node(self, interface="provision", state=states.DEPLOYWAIT, phase="wait_ramdisk",
              info=None, **fields):
        node = self.make_node(uuid=uuidutils.generate_uuid(), **fields)
        node.deploy_interface = interface
        node.provision_state = state
        node.driver_internal_info = dict({"provision_phase": phase} if phase else {},
                                         **(info or {}))
        node.save()
        return node.uuid

    def test_the_sweep_hands_on_our_waiting_nodes_without_a_lock_of_its_own(self):
        waiting = self._node()
        running = self._node(state=states.CLEANWAIT, phase="running")
        self._node(interface="fake")                          # another deploy interface
        self._node(phase="done")                              # finished, resumed elsewhere
        # exit 0 recorded a moment ago: its resume is on its way
        self._node(state=states.CLEANWAIT, phase="done",
                   info={"provision_exit_code": 0, "provision_done_at": time.time()})
        # exit 0 recorded long ago and still waiting: the resume was lost (test_lost_resume)
        lost = self._node(state=states.CLEANWAIT, phase="done",
                          info={"provision_exit_code": 0, "provision_done_at": 0})
        self._node(state=states.ACTIVE, phase=None)
        self._node(maintenance=True)
        self._node(reservation="other-conductor")             # a poll or a step holds it
        manager = Manager()
        with mock.patch.object(task_manager, "acquire",
                               side_effect=AssertionError("the sweep took a lock")), \
                mock.patch.object(deploy.FOLLOWERS, "submit",
                                  wraps=deploy.FOLLOWERS.submit) as submit:
            deploy.ProvisionDeploy()._follow_provision(manager, self.context)
        self.assertEqual(sorted([waiting, running, lost]), sorted(manager.spawned))
        self.assertEqual(3, submit.call_count)
        for call in submit.call_args_list:
            self.assertIs(follow.follow_in_worker, call.args[2])
        # the pollers' slots are freed once they end; here they never ran
        for uuid in manager.spawned:
            deploy.FOLLOWERS._done(uuid)

    def test_a_sweep_past_its_interval_leaves_every_node_to_the_next_one(self):
        # starting nodes included (issue 52 item 8): each waited for a slot up to a look's
        # deadline, and a sweep of dripping ramdisks' starts never ended
        import itertools
        from types import SimpleNamespace
        self._node()
        self._node(phase="running")
        manager = Manager()
        clock = SimpleNamespace(monotonic=itertools.count(0, 1000).__next__, time=time.time)
        with mock.patch.object(deploy, "time", clock):
            deploy.ProvisionDeploy()._follow_provision(manager, self.context)
        self.assertEqual([], manager.spawned)

    def _sweep(self):
        manager = Manager()
        deploy.ProvisionDeploy()._follow_provision(manager, self.context)
        self.addCleanup(lambda: [deploy.FOLLOWERS._done(u) for u in manager.spawned])
        return manager.spawned

    def test_starts_leave_a_quarter_of_the_workers_to_running_jobs_under_strain(self):
        # (issue 52 item 8: ramdisks that drip held every worker with their starts): a look
        # has held its worker for connect_timeout
        self.config(periodic_max_workers=8, group="conductor")
        self.config(poll_interval=1, group="provision_agent")
        deploy.FOLLOWERS._start("held")
        deploy.FOLLOWERS._began["held"] -= 60
        self.addCleanup(deploy.FOLLOWERS._done, "held")
        starting = {self._node() for _ in range(10)}
        running = {self._node(phase="running") for _ in range(2)}
        handed = self._sweep()
        self.assertEqual(6, len(set(handed) & starting))
        # the 8th slot is "held"'s, the 7th a running job's
        self.assertEqual(1, len(set(handed) - starting))
        self.assertLessEqual(set(handed) - starting, running)

    def test_a_burst_of_quick_starts_may_take_every_worker(self):
        self.config(periodic_max_workers=8, group="conductor")
        self.config(poll_interval=1, group="provision_agent")
        starting = {self._node() for _ in range(10)}
        self._node(phase="running")
        handed = self._sweep()
        self.assertEqual(8, len(set(handed) & starting))

    def test_slow_ramdisks_get_a_quarter_of_the_workers_and_come_last(self):
        self.config(periodic_max_workers=8, group="conductor")
        self.config(poll_interval=1, group="provision_agent")
        slow = [self._node(phase=phase, info={"provision_slow_looks": 2})
                for phase in ("wait_ramdisk", "running") * 3]
        running = self._node(phase="running")
        handed = self._sweep()
        self.assertEqual(running, handed[0])
        self.assertEqual(3, len(handed))
        self.assertEqual(2, len(set(handed) & set(slow)))
