"""Ironic's fast track ([deploy]fast_track, or driver_info/fast_track per node) with this
interface: a ramdisk left running after inspection or cleaning is used again by the next
cleaning or deploy, without a power cycle, a POST and another boot of the ramdisk.

The rules are Ironic's own, decided by Ironic's own code (conductor.utils.is_fast_track): fast
track on for the node, the node powered on (asked of its BMC), no last_error, and a heartbeat
recorded within [deploy]fast_track_timeout with the ramdisk's agent_url, which Ironic wipes
with the agent token whenever it powers the node off. On top, this interface needs what that
ramdisk's heartbeats told us (heartbeat.py): its address, port and host key. The ramdisk must
still prove over SSH, before it is sent anything, that it looked the node up with the agent
token the node holds (remote.verify_binding): Ironic keeps that token from the cleaning to the
deploy only when fast track is on, so nothing about the binding changes. A ramdisk that does
not answer, or answers with another key or binding, is not used: the node is powered into a
fresh one as without fast track.

While fast track is on, a heartbeat from the node's ramdisk outside a job of ours (the node
manageable, available, between two steps) is recorded, as Ironic's own agent interfaces
record it, so that the next job knows the ramdisk is alive and where it is.
"""

import logging
import threading
import time

from ironic.common import exception, states
from ironic.common import utils as ironic_utils
from ironic.conductor import utils as manager_utils

from ironic_driver import report
from ironic_driver.conversation import follow, job, remote, ssh, starting

LOG = logging.getLogger(__name__)

# Where Ironic's agent interfaces record a heartbeat with fast track on and act on none
# (agent_base.FASTTRACK_HEARTBEAT_ALLOWED less the waits; ours act in those, job.py).
RECORDED_STATES = frozenset((
    states.ENROLL, states.MANAGEABLE, states.AVAILABLE, states.CLEANING, states.CLEANWAIT,
    states.CLEANHOLD, states.DEPLOYING, states.DEPLOYWAIT, states.DEPLOYHOLD))


def enabled(node):
    """Fast track is on for node: driver_info/fast_track, else [deploy]fast_track. A
    driver_info value that is not a boolean counts as off here (validate says so)."""
    try:
        return ironic_utils.fast_track_enabled(node)
    except exception.InvalidParameterValue:
        return False


def records_heartbeat(node):
    """A heartbeat from node's ramdisk that starts nothing is still recorded."""
    return enabled(node) and node.provision_state in RECORDED_STATES


def reusable(task):
    """(True, why) when the ramdisk running on the node may be used again; (False, why)
    otherwise. Asks the node's BMC for its power state (Ironic's is_fast_track)."""
    why = _not_recorded(task.node)
    return (False, why) if why else _rules_allow(task)


def _not_recorded(node):
    """Why the node's records alone rule its ramdisk out; None when they do not."""
    if not enabled(node):
        return "fast track is off"
    info = node.driver_internal_info
    if not all(info.get(k) for k in job.RAMDISK_KEYS[:3]):
        return "no heartbeat told where its ramdisk is"
    if not info.get("agent_secret_token"):
        return "the node holds no agent token its ramdisk could be bound with"
    return None


def _rules_allow(task):
    """reusable() for a node whose records allow it: Ironic's own rules, the BMC asked."""
    info = task.node.driver_internal_info
    try:
        alive = manager_utils.is_fast_track(task)
    except ValueError:  # an agent_last_heartbeat Ironic cannot read (written by an older us)
        alive = False
    if not alive:
        return False, ("Ironic's fast track rules refuse it (powered off, last_error set, or "
                       "no heartbeat within [deploy]fast_track_timeout)")
    return True, (f"its ramdisk at {info[job.PREFIX + 'ssh_address']} heartbeated at "
                  f"{info.get('agent_last_heartbeat')}")


class Unusable(Exception):
    """The running ramdisk cannot take the job: it did not answer, or is not this node's."""


class Ahead:
    """The SSH connection to the ramdisk the node's heartbeats named, opened in a thread
    while Ironic's fast track rules are asked (the BMC's power state: 0.35 s of the 2.7 s
    from the deploy request to the image's first byte in the lab, 2026-11-29), so that
    neither waits for the other. Connecting sends the ramdisk nothing: the binding is
    checked before the job is (starting.start_checked). A connection the rules then refuse
    is closed, when it is made, without waiting for it."""

    def __init__(self, node, target, o):
        self._lock = threading.Lock()
        self._session = self._error = None
        self._discarded = False
        self._thread = threading.Thread(target=self._connect, args=(node, target, o),
                                        name=f"fast-track-ssh-{node.uuid}", daemon=True)
        self._thread.start()

    def _connect(self, node, target, o):
        try:
            session = follow.connect(node, target, o)
        except BaseException as exc:     # raised again to the step that asks for it
            with self._lock:
                self._error = exc
            return
        with self._lock:
            self._session = session
            discarded = self._discarded
        if discarded:
            session.close()

    def session(self):
        """The session, or what connecting raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._session

    def discard(self):
        with self._lock:
            self._discarded = True
            session = self._session
        if session is not None:
            session.close()


def connect_ahead(node):
    """An Ahead for the node's recorded ramdisk, None when no address of it is recorded."""
    o = job.opts()
    target = follow.ssh_target(node, o)
    return Ahead(node, target, o) if target is not None else None


def start_in_running_ramdisk(task, provision_input, ahead=None, asked=None):
    """Start the job the node's current step asks for in the ramdisk its heartbeats named,
    now, from the step itself: the binding checked first, as in any look. Returns the
    updates to record; Unusable when that ramdisk cannot take it (nothing was sent then).
    ahead: its connection, opened while the rules were asked (connect_ahead); asked: when
    the step began asking them (its timings' to_look)."""
    node, o = task.node, job.opts()
    target = follow.ssh_target(node, o)
    if target is None:
        raise Unusable("no address of its ramdisk is recorded")
    began = time.monotonic()
    clock = starting.Timings(began if asked is None else asked, began)
    try:
        session = ahead.session() if ahead is not None else follow.connect(node, target, o)
    except follow.TRANSIENT + (ssh.HostKeyError, ssh.paramiko.BadHostKeyException) as exc:
        raise Unusable(follow.ssh_error(exc)) from None
    try:
        starting.start_checked(session, node, target, o, provision_input, clock)
    except follow.TRANSIENT + (remote.BadRamdisk, ssh.TooLarge, ssh.BrokenProtocol,
                               RuntimeError) as exc:
        raise Unusable(follow.ssh_error(exc)) from None
    finally:
        session.close()
    return starting.started(node, clock, since="its step began (fast track)")


def start_or_power_cycle(task, provision_input, prepare_boot=False):
    """The job of the current step started in the ramdisk fast track kept (the node saved
    with it running), or, when that ramdisk is gone, did not answer or is not this node's,
    the node powered into a fresh one whose heartbeat starts it. prepare_boot: the deploy's
    prepare() skipped the boot interface's prepare_ramdisk, done now before that."""
    node = task.node
    asked = time.monotonic()
    reuse, why, ahead = False, _not_recorded(node), None
    if why is None:
        # the connection is made while Ironic's rules ask the BMC, not after (Ahead)
        ahead = connect_ahead(node)
        try:
            reuse, why = _rules_allow(task)
        except BaseException:
            if ahead is not None:
                ahead.discard()
            raise
    if reuse:
        try:
            updates = start_in_running_ramdisk(task, provision_input, ahead, asked)
        except Unusable as exc:
            reuse, why = False, f"its ramdisk cannot take the job: {exc}"
    elif ahead is not None:
        ahead.discard()
    if reuse:
        for key, value in updates.items():
            node.set_driver_internal_info(key, value)
        node.save()
        return
    LOG.warning("Node %s: fast track not possible after all (%s); powering it into a fresh "
                "ramdisk", node.uuid, report.bounded(why))
    if prepare_boot:
        task.driver.boot.prepare_ramdisk(task, job.ramdisk_options(node))
    manager_utils.node_power_action(task, states.REBOOT)
    job.begin(node)
    node.save()
