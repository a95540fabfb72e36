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
import datetime
import ipaddress
import logging
import time
import urllib.parse

from ironic.common import exception, states
from ironic.conf import CONF

from ironic_driver import report
from ironic_driver.conversation import (
    dispatched,
    fanout,
    fast_track,
    follow,
    job,
    pace,
    record,
    ssh,
)

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
    heard = time.monotonic()
    if not job.ramdisk_expected(node):
        if fast_track.records_heartbeat(node):
            _record_only(task, callback_url, agent_version, agent_verify_ca)
        else:
            LOG.debug("Heartbeat from node %s in %s ignored: no provision job waits for it",
                      node.uuid, node.provision_state)
        return
    try:
        updates, first = _updates(node, callback_url, agent_verify_ca)
    except Changed as exc:
        _refuse(task, str(exc))
        return
    except ValueError as exc:
        _refuse(task, f"the ramdisk's heartbeat is unusable: {exc}")
        return
    updates[P + "awaiting_heartbeat"] = None
    if job.opts().ramdisk_commands and job.waiting(node):
        try:
            dispatched.check_heartbeat_version(agent_version,
                                               bool(job.opts().agent_update_wheel))
        except RuntimeError as exc:
            _refuse(task, str(exc))
            return
    if not _save(task, updates, first, job.ramdisk_expected):
        return
    if node.maintenance:
        _in_maintenance(task)
        return
    if first:
        host_key = updates[P + "host_key"]
        LOG.info("Node %s: ramdisk (agent %s) heartbeats from %s port %s with host key %s",
                 node.uuid, report.bounded(agent_version, 100), updates[P + "ssh_address"],
                 updates[P + "ssh_port"],
                 ssh.fingerprint(host_key) if host_key else "(none reported)")
    phase = node.driver_internal_info.get(P + "phase")
    if phase == "wait_ramdisk" and job.waiting(node):
        # Start now rather than at the next poll; the heartbeat runs in a conductor worker.
        _look_now(task, "starting the job", provision_input, heard)
    elif phase == "running" and agent_status in EXITED and job.waiting(node):
        if fanout.FOLLOWERS.since_last(node.uuid) >= job.opts().poll_interval:
            _look_now(task, "the ramdisk says its job exited", provision_input)
        else:
            fanout.FOLLOWERS.hurry(node.uuid)


def _look_now(task, why, provision_input, heard=None):
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
            follow.follow(task, provision_input, heard=heard)
            return
    fanout.FOLLOWERS.hurry(uuid)


class Changed(ValueError):
    """The heartbeat names another address or key than this ramdisk's earlier ones."""


def _updates(node, callback_url, agent_verify_ca, in_job=True):
    """(what a heartbeat records, whether it is the first of its ramdisk); ValueError when
    it cannot be used, Changed when it names another ramdisk than the one recorded. in_job:
    a job of ours waits for this ramdisk (job.begin forgot any other one)."""
    address, port = _callback_address(callback_url)
    host_key = _reported_key(agent_verify_ca)
    info = node.driver_internal_info
    updates = {P + "ssh_address": address, P + "ssh_port": port, P + "host_key": host_key}
    # Outside a job, what an earlier boot's heartbeats said goes with Ironic's agent_url,
    # which Ironic wipes when it powers the node off (fast track keeps both).
    first = info.get(P + "ssh_address") is None or not (in_job or info.get("agent_url"))
    if not first and any(info.get(k) != v for k, v in updates.items()):
        # Ironic already refuses a changed URL or key at the API; this is the same rule for
        # a heartbeat that reached us another way (say, after a conductor takeover).
        raise Changed(f"the ramdisk's heartbeat changed its address or host key (now "
                      f"{address} port {port}); refusing it")
    updates["agent_url"] = callback_url
    if agent_verify_ca:
        updates["agent_verify_ca"] = agent_verify_ca
    updates[P + "heartbeats"] = (0 if first else info.get(P + "heartbeats", 0)) + 1
    # Ironic's own format (Node.timestamp_driver_internal_info), which its fast track reads
    updates["agent_last_heartbeat"] = _now_iso()
    return updates, first


def _now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")


def _save(task, updates, first, still):
    """Record a heartbeat; False when it was not (the node locked, or moved on).

    A heartbeat that says nothing new is not written. 500 ramdisks send ten a second, and
    each write takes one of the conductor's few write turns (turns.py) while it holds a
    conductor worker: written every time, they left none for anything else
    (benchmarks/results/2026-11-26-ironic_scale-paced-looks.md)."""
    node = task.node
    if not first and _recorded_within(node.driver_internal_info, RECORD_EVERY):
        return True
    try:
        # As Ironic's own heartbeat handling: a node another thread holds (a poll looking
        # at it) is left alone; the next heartbeat comes within a minute.
        return record.save(task, updates, retry_lock=False, still=still)
    except exception.NodeLocked:
        LOG.info("Heartbeat from node %s not recorded: the node is locked (%s); the next "
                 "one will be", node.uuid, node.reservation)
        return False


def _record_only(task, callback_url, agent_version, agent_verify_ca):
    """Fast track (fast_track.py): a ramdisk that runs no job of ours is recorded, as
    Ironic's agent interfaces record one, so that the next job may use it again."""
    node = task.node
    try:
        updates, first = _updates(node, callback_url, agent_verify_ca, in_job=False)
    except ValueError as exc:
        LOG.warning("Heartbeat from node %s in %s not recorded: %s", node.uuid,
                    node.provision_state, report.bounded(exc))
        return
    if _save(task, updates, first, fast_track.records_heartbeat) and first:
        LOG.info("Node %s (%s): ramdisk (agent %s) heartbeats from %s port %s; kept for "
                 "fast track", node.uuid, node.provision_state,
                 report.bounded(agent_version, 100), updates[P + "ssh_address"],
                 updates[P + "ssh_port"])


def _recorded_within(info, seconds):
    """True when the last heartbeat recorded (agent_last_heartbeat, Ironic's format or the
    one without a fraction that this interface wrote before) is that recent."""
    text = (info.get("agent_last_heartbeat") or "").partition(".")[0]
    try:
        last = calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
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
    try:
        # inside the try: a malformed IPv6 literal ("https://[fd00::5:22") fails the parse
        parsed = urllib.parse.urlsplit(url or "")
        address = ipaddress.ip_address(parsed.hostname or "")
        port = parsed.port or 22
        # It is kept as agent_url: nothing but where SSH is (provision-ironic-agent sends
        # https://ADDRESS:PORT), not a path or query of any length and content.
        if parsed.path not in ("", "/") or parsed.query or parsed.fragment or parsed.username:
            raise ValueError
    except ValueError:
        raise ValueError(f"callback_url {str(url)[:200]!r} does not name an IP address and "
                         "port alone (https://ADDRESS:PORT, https://[IPv6]:PORT)") from None
    if getattr(address, "scope_id", None) or address.is_link_local:
        # fe80::/10 is reachable only through an interface of the conductor's, which the
        # ramdisk cannot name (a %zone it sends is one of its own interfaces)
        raise ValueError(f"callback_url {str(url)[:200]!r} names a link-local address, which "
                         "the conductor cannot reach by it; the ramdisk needs a global or "
                         "unique local address on the NIC that reaches Ironic's API")
    return str(address), port


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
