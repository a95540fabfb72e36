"""What the ramdisk's heartbeat tells the conductor: where the ramdisk's SSH is and which host
key it has. Recorded as Ironic's own heartbeat handling records an agent's (agent_url,
agent_verify_ca, agent_last_heartbeat), with Ironic's rules for a node in maintenance and for
a node another thread holds locked; the first heartbeat of a job starts it at once (follow.py)
instead of at the next poll, and the heartbeat that says the job exited (agent_status "end",
sent by provision-ironic-agent as soon as the exit code is there) has it looked at at once.
That heartbeat is only a hint: the look reads the exit code over SSH as any look does, and a
node is looked at no more than once per poll_interval however often its ramdisk heartbeats.
"""

import calendar
import ipaddress
import logging
import time
import urllib.parse

from ironic.common import exception, states
from ironic.conf import CONF

from ironic_driver import report
from ironic_driver.conversation import fanout, follow, job, pace, record, ssh

LOG = logging.getLogger(__name__)
P = job.PREFIX


# What Ironic's ramdisk API lets an agent say about itself (AGENT_VALID_STATES) that means
# "what you started here is over".
EXITED = ("end", "error")
# How often an unchanged heartbeat is written (agent_last_heartbeat, provision_heartbeats).
RECORD_EVERY = 60


def handle(task, provision_input, callback_url, agent_version, agent_verify_ca,
           agent_status=None):
    """provision_input: what a look started from here sends (follow.follow)."""
    try:
        _handle(task, provision_input, callback_url, agent_version, agent_verify_ca,
                agent_status)
    finally:
        record.WRITER.leave()


def _handle(task, provision_input, callback_url, agent_version, agent_verify_ca, agent_status):
    node = task.node
    if not job.ramdisk_expected(node):
        LOG.debug("Heartbeat from node %s in %s ignored: no provision job waits for it",
                  node.uuid, node.provision_state)
        return
    try:
        address, port = _callback_address(callback_url)
        host_key = _reported_key(agent_verify_ca)
    except ValueError as exc:
        _refuse(task, f"the ramdisk's heartbeat is unusable: {exc}")
        return
    info = node.driver_internal_info
    updates = {P + "ssh_address": address, P + "ssh_port": port, P + "host_key": host_key}
    first = info.get(P + "ssh_address") is None
    if not first and any(info.get(k) != v for k, v in updates.items()):
        # Ironic already refuses a changed URL or key at the API; this is the same rule for
        # a heartbeat that reached us another way (say, after a conductor takeover).
        _refuse(task, f"the ramdisk's heartbeat changed its address or host key (now "
                      f"{address} port {port}); refusing it")
        return
    updates["agent_url"] = callback_url
    if agent_verify_ca:
        updates["agent_verify_ca"] = agent_verify_ca
    updates[P + "heartbeats"] = info.get(P + "heartbeats", 0) + 1
    updates[P + "awaiting_heartbeat"] = None
    updates["agent_last_heartbeat"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    # A heartbeat that says nothing new is not written. 500 ramdisks send ten a second, and
    # each write takes one of the conductor's few write turns (turns.py) while it holds a
    # conductor worker: written every time, they left none for anything else
    # (benchmarks/results/2026-11-26-ironic_scale-paced-looks.md).
    if first or not _recorded_within(info, RECORD_EVERY):
        try:
            # As Ironic's own heartbeat handling: a node another thread holds (a poll looking
            # at it) is left alone; the next heartbeat comes within a minute.
            if not record.save(task, updates, retry_lock=False):
                return
        except exception.NodeLocked:
            LOG.info("Heartbeat from node %s not recorded: the node is locked (%s); the next "
                     "one will be", node.uuid, node.reservation)
            return
    if node.maintenance:
        _in_maintenance(task)
        return
    if first:
        LOG.info("Node %s: ramdisk (agent %s) heartbeats from %s port %s with host key %s",
                 node.uuid, report.bounded(agent_version, 100), address, port,
                 ssh.fingerprint(host_key) if host_key else "(none reported)")
    phase = node.driver_internal_info.get(P + "phase")
    if phase == "wait_ramdisk" and job.waiting(node):
        # Start now rather than at the next poll; the heartbeat runs in a conductor worker.
        _look_now(task, "starting the job", provision_input)
    elif phase == "running" and agent_status in EXITED and job.waiting(node):
        if fanout.FOLLOWERS.since_last(node.uuid) >= job.opts().poll_interval:
            _look_now(task, "the ramdisk says its job exited", provision_input)
        else:
            fanout.FOLLOWERS.hurry(node.uuid)


def _look_now(task, why, provision_input):
    """A look at the node in this heartbeat's worker, counted as the sweep's are (so that the
    sweep's next one keeps its distance, and no more than [conductor]periodic_max_workers
    run at once, and the looks that start jobs in their share); when one runs already, or as
    many as that, the sweep's next one, which a hurried node does not wait its
    running_poll_interval for. A slow ramdisk (pace.py) is looked at only by the sweep, after
    its back-off: otherwise its own heartbeats would bring it a look, at its deadline, each."""
    uuid, info = task.node.uuid, task.node.driver_internal_info
    if pace.slow(info):
        return
    limit = job.poll_limit()
    starting = info.get(P + "phase") == "wait_ramdisk"
    with fanout.FOLLOWERS.claim(uuid, limit, pace.tags(starting, False), pace.shares(
            limit, pace.strained(fanout.FOLLOWERS, job.opts()))) as mine:
        if mine:
            LOG.debug("Node %s: %s; looking now", uuid, why)
            follow.follow(task, provision_input)
            return
    fanout.FOLLOWERS.hurry(uuid)


def _recorded_within(info, seconds):
    """True when the last heartbeat recorded (agent_last_heartbeat) is that recent."""
    try:
        last = calendar.timegm(time.strptime(info.get("agent_last_heartbeat") or "",
                                             "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return False
    return 0 <= time.time() - last < seconds


def _in_maintenance(task):
    """What Ironic's HeartbeatMixin does with a heartbeat from a node in maintenance: abort
    the deploy or the cleaning, unless [conductor]allow_provisioning_in_maintenance; never
    start anything."""
    node = task.node
    if CONF.conductor.allow_provisioning_in_maintenance:
        LOG.warning("Heartbeat from node %s in maintenance mode; not taking any action.",
                    node.uuid)
        return
    if node.provision_state == states.CLEANWAIT:
        record.fail(task, "Cleaning aborted as node is in maintenance mode")
    else:
        record.fail(task, "Deploy aborted as node is in maintenance mode")


def _refuse(task, message):
    """Fails our job; while another interface's step waits, only says so (that step is not
    ours to fail)."""
    if job.waiting(task.node):
        record.fail(task, message)
    else:
        LOG.warning("Node %s: %s (not recorded; the node waits in %s for %s)", task.node.uuid,
                    report.bounded(message), task.node.provision_state, _step_name(task.node))


def _step_name(node):
    field, _ = job.OUR_STEPS[node.provision_state]
    step = getattr(node, field) or {}
    return f"{step.get('interface')}.{step.get('step')}"


def _callback_address(url):
    parsed = urllib.parse.urlsplit(url or "")
    try:
        address = str(ipaddress.ip_address(parsed.hostname or ""))
        port = parsed.port or 22
        # It is kept as agent_url: nothing but where SSH is (provision-ironic-agent sends
        # https://ADDRESS:PORT), not a path or query of any length and content.
        if parsed.path not in ("", "/") or parsed.query or parsed.fragment or parsed.username:
            raise ValueError
    except ValueError:
        raise ValueError(f"callback_url {str(url)[:200]!r} does not name an IP address and "
                         "port alone (https://ADDRESS:PORT)") from None
    return address, port


def _reported_key(path):
    """agent_verify_ca reaches us as the file Ironic stored the reported text in."""
    if not path:
        return None
    try:
        with open(path) as f:
            text = f.read(16384)
    except OSError as exc:
        raise ValueError(f"cannot read the reported host key ({exc})") from None
    key = ssh.parse_public_key(text)
    return f"{key.get_name()} {key.get_base64()}"
