"""Following a job in the ramdisk: starting it over SSH where the heartbeat (heartbeat.py) or
driver_info says the ramdisk is, reading its progress and exit code, and moving the node on.

Two jobs, chosen by the state the node waits in:
    deploy wait  `provision` with the node's input document; exit 0 resumes the deploy steps
    clean wait   `provision erase` (the erase_devices_metadata clean step); exit 0 resumes
                 the clean steps
Any other exit code, a refused host key, or no progress for the callback timeout (timeouts.py)
fails the deploy or the cleaning with the tail of provision's output in last_error.

A job runs only while the step Ironic is in is ours (deploy.deploy, deploy.
erase_devices_metadata): another interface's step that waits in the same state (a BIOS or RAID
step rebooting the node) never starts an erase or a provision. A ramdisk found through a
heartbeat has to prove, before it is sent anything, that it is the one that looked up this node
(remote.verify_binding). Every look ends within connect_timeout + command_timeout and reads a
bounded number of bytes (ssh.Session), whatever the ramdisk does.
"""

import logging
import time
import traceback
import typing

from ironic.common import exception, states
from ironic.conductor import task_manager
from ironic.conductor import utils as manager_utils

from ironic_driver import report
from ironic_driver.conversation import (
    dispatched,
    job,
    pace,
    record,
    remote,
    ssh,
    starting,
    timeouts,
    vendor_steps,
)
from provision_agent.plan import urls

LOG = logging.getLogger(__name__)

PREFIX = job.PREFIX
TRANSIENT = (OSError, EOFError, ssh.paramiko.SSHException, TimeoutError, ssh.LimitExceeded)


def follow_in_worker(context, node_uuid, provision_input, spawn=None):
    """provision_input: see follow. spawn: the conductor's way to start a worker (its
    _spawn_worker), for resuming a finished deploy on this task's lock."""
    try:
        with task_manager.acquire(context, node_uuid, shared=True,
                                  purpose="following provision in a ramdisk") as task:
            follow(task, provision_input, spawn)
    except (exception.NodeNotFound, exception.NodeLocked) as exc:
        LOG.info("Following provision on node %s skipped: %s", node_uuid, exc)
    except Exception as exc:
        # Nobody waits for this worker: what is not logged here is lost. The traceback ends
        # in the exception's text, which may quote the ramdisk: bounded like any such text.
        LOG.error("Following provision on node %s failed: %s", node_uuid, report.bounded(
            "".join(traceback.format_exception(exc)), report.MESSAGE_CHARS))


def follow(task, provision_input, spawn=None, heard=None):
    """One look at one node; transitions it when its job is done. Safe to call any time.

    provision_input(node, opts): (provision's input, the keyring sent beside it or None) for
    the node's deploy; the deploy interface passes sent.for_ramdisk: documents are built
    there, never by the conversation with the ramdisk. heard: time.monotonic() of the
    heartbeat this look answers (its wait is part of the start's timings)."""
    try:
        _follow(task, provision_input, spawn, heard)
    finally:
        record.WRITER.leave()


def _follow(task, provision_input, spawn, heard=None):
    node = task.node
    o = job.opts()
    grace = job.resume_grace(o)
    if job.resume_lost(node, grace):
        LOG.warning("%s on node %s exited 0 more than %s s ago and the node still waits at "
                    "its step: the resume was lost (a conductor that died, or no free "
                    "worker); resuming again", _what(node), node.uuid, grace)
        if job.listing(node):
            vendor_steps.resume_after_listing(task, {PREFIX + "done_at": time.time()})
            return
        _resume(task, spawn, {PREFIX + "done_at": time.time()},
                still=lambda n: job.resume_lost(n, grace))
        return
    if not job.waiting(node):
        return
    info = node.driver_internal_info
    phase = info[PREFIX + "phase"]
    LOG.debug("provision poll of node %s in phase %s", node.uuid, phase)
    late = timeouts.expired(node, o)
    if late:
        record.fail(task, f"{_what(node)} showed no progress for {late[0]} s ({late[2]} is "
                   f"{late[1]} s; phase {phase}); last SSH error: "
                   f"{report.bounded(info.get(PREFIX + 'last_ssh_error'))}")
        return
    target = ssh_target(node, o)
    if target is None:
        _await_heartbeat(task)
        return
    began = time.monotonic()
    try:
        session = connect(node, target, o)
    except TRANSIENT + (ssh.HostKeyError,) as exc:
        # A key that differs from the pin is not a ramdisk still booting: stop at once.
        if isinstance(exc, (ssh.HostKeyError, ssh.paramiko.BadHostKeyException)):
            record.fail(task, f"refusing the ramdisk of node {node.uuid}: {exc}")
            return
        record.save(task, {PREFIX + "last_ssh_error": ssh_error(exc),
                           **_slow(node, exc, began, o)})
        return
    updates = {}
    try:
        st = _look(session, node, target, o, provision_input, updates,
                   starting.Timings(heard if heard is not None else began, began))
    except TRANSIENT as exc:
        updates[PREFIX + "last_ssh_error"] = ssh_error(exc)
        updates.update(_slow(node, exc, began, o))
        record.save(task, updates)
        return
    except (remote.BadRamdisk, ssh.TooLarge, ssh.BrokenProtocol) as exc:
        record.fail(task, f"refusing the ramdisk at {target.address} port {target.port}: {exc}; "
                   "nothing more is sent to it")
        return
    except (RuntimeError, exception.IronicException) as exc:
        record.fail(task, str(exc))
        return
    finally:
        session.close()
    _record(task, spawn, updates, st)


def _look(session, node, target, o, provision_input, updates, clock):
    """Over a session: the job started when it waits to be (its timings on clock, what to
    record added to updates), else the binding checked again; then the job's status."""
    info = node.driver_internal_info
    if info[PREFIX + "phase"] == "wait_ramdisk":
        fresh = starting.start_checked(session, node, target, o, provision_input, clock)
        updates.update(starting.started(node, clock))
        if fresh:
            # A job started this moment has nothing to show yet: its first events are read
            # by the next look (one that adopted a job already run reads them now).
            return {"exit_code": None, "events": [],
                    "events_offset": info.get(PREFIX + "events_offset", 0)}
    elif target.reported:
        remote.verify_binding(session, o.binding_dir, node.uuid,
                              info.get("agent_secret_token") or "")
    return remote.status(session, starting.remote_dir(node, o),
                         info.get(PREFIX + "events_offset", 0), o.log_tail_lines)


def _slow(node, exc, began, o):
    """What a failed look adds to the node's count of slow looks (pace.py)."""
    seconds = time.monotonic() - began
    updates = pace.after_look(node.driver_internal_info, True,
                              unreachable=isinstance(exc, ssh.Unreachable), seconds=seconds,
                              deadline=isinstance(exc, ssh.LimitExceeded), o=o)
    if updates and not pace.slow(node.driver_internal_info):
        LOG.warning("Node %s: its ramdisk held a look for %.0f s and did not answer it (%s); "
                    "it is looked at less often now, and in at most a quarter of the workers, "
                    "until it answers", node.uuid, seconds, type(exc).__name__)
    return updates


def ssh_error(exc):
    """What a look that failed keeps of its error (provision_last_ssh_error): the text
    paramiko raised quotes what the ramdisk sent (its banner, an SFTP status message)."""
    return report.bounded(f"{type(exc).__name__}: {exc}")


def _await_heartbeat(task):
    """A look at a node whose ramdisk has not heartbeated: only the time is kept (the
    heartbeat starts the job), and after a takeover the token may be reissued (job.py)."""
    node = task.node
    # awaiting_heartbeat: the sweep paces these looks (deploy.sweep_order)
    updates = {PREFIX + "last_ssh_error": "no heartbeat from the ramdisk yet (it looks its "
               "node up through ipa-api-url; no driver_info/provision_ssh_address)",
               PREFIX + "awaiting_heartbeat": True}
    updates.update(job.token_updates(node, time.time()))
    if PREFIX + "token_reissued_by" in updates:
        LOG.warning("Node %s: taken over from %s, and its ramdisk has not heartbeated for %s s "
                    "since; its agent token may have been lost with that conductor, so the "
                    "next lookup gets a new one", node.uuid,
                    node.driver_internal_info.get(PREFIX + "begun_by"), job.REISSUE_AFTER)
    record.save(task, updates)


def _record(task, spawn, updates, st):
    """Keep what one look saw; move the node on when its job exited."""
    node = task.node
    info = node.driver_internal_info
    try:
        # a listing's "steps" event is kept apart: the node's vendor steps (vendor_steps.py)
        cache, st["events"] = vendor_steps.from_events(st["events"])
    except vendor_steps.BadListing as exc:
        record.fail(task, f"the ramdisk's list of vendor steps is unusable: {exc}")
        return
    if cache is not None:
        updates[vendor_steps.CACHE] = cache
    if st["events"]:
        updates[PREFIX + "events"] = report.keep(info.get(PREFIX + "events"), st["events"],
                                                 job.opts().events_kept)
        updates[PREFIX + "events_count"] = info.get(PREFIX + "events_count", 0) + len(
            st["events"])
    updates[PREFIX + "events_offset"] = st["events_offset"]
    updates.update(pace.after_look(info, False))
    # Progress moves the node's provisioning time, which Ironic's callback timeout counts from.
    touch = bool(st["events"]) or PREFIX + "phase" in updates
    if st["exit_code"] is None:
        record.save(task, updates, touch=touch)
        return
    updates[PREFIX + "exit_code"] = st["exit_code"]
    if st["exit_code"] != 0:
        record.save(task, updates)
        # a vendor job names itself; an erase's and a deploy's text stays what it was
        what = _what(node) if job.listing(node) or "step " in _what(node) else "provision"
        record.fail(task, report.failed_text(st["exit_code"], st["events"], st["tail"], what))
        return
    if st.get("recovery_keys"):
        # the one place they go (recovery.py); job.begin forgets them with the disks
        updates[PREFIX + "recovery_keys"] = st["recovery_keys"]
    updates[PREFIX + "phase"] = "done"
    updates[PREFIX + "done_at"] = time.time()
    if job.listing(node):
        vendor_steps.resume_after_listing(task, updates)
        return
    _resume(task, spawn, updates)


def _resume(task, spawn, updates, still=job.ramdisk_expected):
    """Record updates and move the node on to its next steps. A deploy with the conductor's
    spawn (the periodic sweep) resumes on this task's lock (record.resume_deploy); otherwise
    through Ironic's RPC to the node's conductor, which a conductor that dies right after
    the save loses: the next look past job.resume_grace sends it again."""
    node = task.node
    steps = job.STEP_TYPE[node.provision_state]
    if spawn is not None and steps == "deploy":
        if record.take(task, updates, still=still):
            LOG.info("%s finished on node %s; resuming the deploy steps", _what(node),
                     node.uuid)
            record.resume_deploy(task, spawn)
        return
    if not record.save(task, updates, still=still):
        return
    LOG.info("%s finished on node %s; resuming the %s steps", _what(node), node.uuid, steps)
    getattr(manager_utils, f"notify_conductor_resume_{steps}")(task)


def _what(node):
    if job.listing(node):
        return "provision steps"
    field, _ = job.OUR_STEPS.get(node.provision_state, ("deploy_step", ()))
    step = getattr(node, field)
    if vendor_steps.is_vendor(node, job.STEP_TYPE.get(node.provision_state, "deploy"), step):
        return f"provision step {step['step']}"
    return "provision erase" if node.provision_state == states.CLEANWAIT else "provision"


class Target(typing.NamedTuple):
    address: str
    port: int
    host_key: str | None
    # True: a heartbeat named it, so the ramdisk must prove it looked up this node. A static
    # driver_info/provision_ssh_address is the operator's word for where the node's ramdisk
    # is, with its key pinned beside it.
    reported: bool


def ssh_target(node, o):
    """Where the node's ramdisk is: driver_info's static address wins over the one the
    heartbeat reported; None while neither is known."""
    info, dii = node.driver_info, node.driver_internal_info
    if info.get("provision_ssh_address"):
        # one spelling of an IP literal: paramiko finds a pin in known_hosts by the text
        # (OpenSSH writes fd00::5, an operator may write FD00:0::5)
        return Target(urls.canonical_address(info["provision_ssh_address"]),
                      int(info.get("provision_ssh_port", o.ssh_port)),
                      info.get("provision_host_key"), False)
    if dii.get(PREFIX + "ssh_address"):
        return Target(dii[PREFIX + "ssh_address"], int(dii[PREFIX + "ssh_port"]),
                      info.get("provision_host_key") or dii.get(PREFIX + "host_key"), True)
    return None


def connect(node, target, o):
    """An SSH session to the ramdisk; with ramdisk_commands, one that reads through the
    ramdisk's registered commands (dispatched.Session)."""
    session = ssh.connect(
        target.address, target.port, node.driver_info.get("provision_ssh_user", o.ssh_user),
        ssh.load_private_key(o.ssh_private_key_file),
        host_key=target.host_key, known_hosts_file=o.ssh_known_hosts_file,
        accept_unknown=o.accept_unknown_host_keys, timeout=o.connect_timeout,
        deadline=o.connect_timeout + o.command_timeout)
    if o.ramdisk_commands:
        return dispatched.Session(session, o.remote_dir, o.binding_dir)
    return session


