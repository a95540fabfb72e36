"""Following a job in the ramdisk: starting it over SSH where the heartbeat (heartbeat.py) or
driver_info says the ramdisk is, reading its progress and exit code, and moving the node on.

Two jobs, chosen by the state the node waits in:
    deploy wait  `provision` with the node's input document; exit 0 resumes the deploy steps
    clean wait   `provision erase` (the erase_devices_metadata clean step); exit 0 resumes
                 the clean steps
Any other exit code, a refused host key, or no progress for the callback timeout (timeouts.py)
fails the deploy or the cleaning with the tail of provision's output in last_error.

State kept in driver_internal_info (all keys start with provision_):
    provision_phase          wait_ramdisk | running | done | failed
    provision_started_at     time.time() of the power on into the ramdisk
    provision_events         the latest provision events (JSON objects from --events_file)
    provision_events_count   how many events were seen in total
    provision_events_offset  bytes of the events file already read
    provision_exit_code      provision's exit code once it exited
    provision_last_ssh_error why the last SSH attempt failed (while waiting for the ramdisk)
    provision_ssh_address, provision_ssh_port, provision_host_key
                             where the ramdisk's heartbeat said SSH is, and the key it reported
    provision_heartbeats     how many heartbeats this boot's ramdisk sent
Ironic's own agent_url and agent_verify_ca (its file of the reported key) are set too, so that
Ironic's checks for a changed callback URL or key apply; Ironic wipes them with the agent token
when a deploy or a cleaning starts.

A job runs only while the step Ironic is in is ours (deploy.deploy, deploy.
erase_devices_metadata): another interface's step that waits in the same state (a BIOS or RAID
step rebooting the node) never starts an erase or a provision. A ramdisk found through a
heartbeat has to prove, before it is sent anything, that it is the one that looked up this node
(remote.verify_binding). Every look ends within connect_timeout + command_timeout and reads a
bounded number of bytes (ssh.Session), whatever the ramdisk does.
"""

import json
import logging
import time
import typing

from ironic.common import exception
from ironic.common import states
from ironic.conductor import deployments
from ironic.conductor import task_manager
from ironic.conductor import utils as manager_utils
from ironic.conf import CONF
from ironic.drivers.modules import deploy_utils

from ironic_driver import layouts, remote, report, ssh, timeouts, turns, validation

LOG = logging.getLogger(__name__)

PREFIX = "provision_"
WAIT_STATES = (states.DEPLOYWAIT, states.CLEANWAIT)
_TRANSIENT = (OSError, EOFError, ssh.paramiko.SSHException, TimeoutError, ssh.LimitExceeded)
# The steps whose waits are ours: (state, node field of the current step, step name).
OUR_STEPS = {states.DEPLOYWAIT: ("deploy_step", "deploy"),
             states.CLEANWAIT: ("clean_step", "erase_devices_metadata")}
WRITER = turns.WRITER


def opts():
    return CONF.provision_agent     # read at call time: tests override it


def is_ours(node):
    return is_ours_info(node.driver_internal_info)


def is_ours_info(driver_internal_info):
    return (driver_internal_info or {}).get(PREFIX + "phase") in ("wait_ramdisk", "running")


def ramdisk_expected(node):
    """A ramdisk we booted may heartbeat now: its address and key are worth recording."""
    return node.provision_state in WAIT_STATES and is_ours(node)


def _step_is_ours(node):
    field, name = OUR_STEPS[node.provision_state]
    step = getattr(node, field) or {}
    return step.get("interface") == "deploy" and step.get("step") == name


def waiting(node):
    """Our job is the one the node waits for: it may be started and followed."""
    return ramdisk_expected(node) and _step_is_ours(node)


def ramdisk_options(node):
    """Kernel parameters for the ramdisk: Ironic's own (ipa-api-url), loglevel (below), and,
    for a node whose host key is pinned statically, the word that keeps the build's key (else
    the ramdisk makes a fresh one per boot and reports it in the heartbeat)."""
    options = deploy_utils.build_agent_options(node)
    # The kernel prints its whole command line at boot, at notice level ("Command line:",
    # "Kernel command line:" and the parameters it leaves to init), on the serial console
    # whoever watches the BMC reads; a virtual-media boot carries the agent token there
    # (ipa-agent-token). loglevel=4 keeps notices off the console, as `quiet` does: kernel
    # warnings and errors still show, init's own lines (redacted) too, all of it in dmesg.
    options["loglevel"] = "4"
    if node.driver_info.get("provision_host_key"):
        options["provision.hostkey"] = "baked"
    return options


def begin(node):
    """Mark the node as waiting for its ramdisk (called right after powering it into one)."""
    forget(node)
    node.del_driver_internal_info(PREFIX + "exit_code")
    node.set_driver_internal_info(PREFIX + "phase", "wait_ramdisk")
    node.set_driver_internal_info(PREFIX + "started_at", time.time())
    node.set_driver_internal_info(PREFIX + "events", [])
    node.set_driver_internal_info(PREFIX + "events_count", 0)
    node.set_driver_internal_info(PREFIX + "events_offset", 0)


def forget(node):
    for key in list(node.driver_internal_info):
        if key.startswith(PREFIX) and key not in (PREFIX + "events", PREFIX + "exit_code",
                                                  PREFIX + "events_count", layouts.STEP_KEY,
                                                  layouts.RAID_MEMBERS_KEY):
            node.del_driver_internal_info(key)


def follow_in_worker(context, node_uuid, spawn=None):
    """spawn: the conductor's way to start a worker (its _spawn_worker), for resuming a
    finished deploy on this task's lock."""
    try:
        with task_manager.acquire(context, node_uuid, shared=True,
                                  purpose="following provision in a ramdisk") as task:
            follow(task, spawn)
    except (exception.NodeNotFound, exception.NodeLocked) as exc:
        LOG.info("Following provision on node %s skipped: %s", node_uuid, exc)
    except Exception:
        # Nobody waits for this worker: what is not logged here is lost.
        LOG.exception("Following provision on node %s failed", node_uuid)


def _job(node, o):
    """(what runs, its command, its input document) for the state the node waits in."""
    if node.provision_state == states.CLEANWAIT:
        skip = node.properties.get("skip_block_devices") or []
        return ("erase", remote.provision_argv(o.provision_command, None,
                                               o.provision_extra_args, subcommand="erase"),
                _json({"skip_block_devices": skip}))
    return ("provision", remote.provision_argv(o.provision_command, o.data_driver,
                                               o.provision_extra_args),
            _json(validation.payload(node, o.data_driver)))


def follow(task, spawn=None):
    """One look at one node; transitions it when its job is done. Safe to call any time."""
    try:
        _follow(task, spawn)
    finally:
        WRITER.leave()


def _follow(task, spawn):
    node = task.node
    if not waiting(node):
        return
    o = opts()
    info = node.driver_internal_info
    phase = info[PREFIX + "phase"]
    LOG.debug("provision poll of node %s in phase %s", node.uuid, phase)
    late = timeouts.expired(node, o)
    if late:
        what = "provision erase" if node.provision_state == states.CLEANWAIT else "provision"
        fail(task, f"{what} showed no progress for {late[0]} s ({late[2]} is {late[1]} s; "
                   f"phase {phase}); last SSH error: {info.get(PREFIX + 'last_ssh_error')}")
        return
    target = ssh_target(node, o)
    if target is None:
        save(task, {PREFIX + "last_ssh_error": "no heartbeat from the ramdisk yet (it looks "
                     "its node up through ipa-api-url; no driver_info/provision_ssh_address)"})
        return
    try:
        session = _connect(node, target, o)
    except _TRANSIENT + (ssh.HostKeyError,) as exc:
        # A key that differs from the pin is not a ramdisk still booting: stop at once.
        if isinstance(exc, (ssh.HostKeyError, ssh.paramiko.BadHostKeyException)):
            fail(task, f"refusing the ramdisk of node {node.uuid}: {exc}")
            return
        save(task, {PREFIX + "last_ssh_error": f"{type(exc).__name__}: {exc}"})
        return
    updates = {}
    try:
        if target.reported:
            remote.verify_binding(session, o.binding_dir, node.uuid,
                                  info.get("agent_secret_token") or "")
        if phase == "wait_ramdisk":
            _start(session, node, o)
            updates[PREFIX + "phase"] = "running"
            updates[PREFIX + "last_ssh_error"] = None
        st = remote.status(session, _remote_dir(node, o), info.get(PREFIX + "events_offset", 0),
                           o.log_tail_lines)
    except _TRANSIENT as exc:
        updates[PREFIX + "last_ssh_error"] = f"{type(exc).__name__}: {exc}"
        save(task, updates)
        return
    except (remote.BadRamdisk, ssh.TooLarge) as exc:
        fail(task, f"refusing the ramdisk at {target.address} port {target.port}: {exc}; "
                   "nothing more is sent to it")
        return
    except (RuntimeError, exception.IronicException) as exc:
        fail(task, report.clean_text(str(exc)))
        return
    finally:
        session.close()
    _record(task, spawn, updates, st)


def _start(session, node, o):
    what, command, text = _job(node, o)
    if remote.start(session, _remote_dir(node, o), text, command):
        LOG.info("%s started on node %s", what, node.uuid)
    else:
        LOG.warning("%s was already running on node %s (started by a poll whose progress was "
                    "not saved); following that one", what, node.uuid)


def _record(task, spawn, updates, st):
    """Keep what one look saw; move the node on when its job exited."""
    node = task.node
    info = node.driver_internal_info
    if st["events"]:
        updates[PREFIX + "events"] = report.keep(info.get(PREFIX + "events"), st["events"],
                                                 opts().events_kept)
        updates[PREFIX + "events_count"] = info.get(PREFIX + "events_count", 0) + len(
            st["events"])
    updates[PREFIX + "events_offset"] = st["events_offset"]
    # Progress moves the node's provisioning time, which Ironic's callback timeout counts from.
    touch = bool(st["events"]) or PREFIX + "phase" in updates
    if st["exit_code"] is None:
        save(task, updates, touch=touch)
        return
    updates[PREFIX + "exit_code"] = st["exit_code"]
    if st["exit_code"] != 0:
        save(task, updates)
        fail(task, f"provision exited with {st['exit_code']}; last output:\n"
                   f"{report.tail_for_error(st['tail'])}")
        return
    updates[PREFIX + "phase"] = "done"
    if spawn is not None and node.provision_state == states.DEPLOYWAIT:
        if _take(task, updates):
            LOG.info("provision finished on node %s; resuming the deploy steps", node.uuid)
            _resume_deploy(task, spawn)
        return
    if not save(task, updates):
        return
    if node.provision_state == states.CLEANWAIT:
        LOG.info("provision erase finished on node %s; resuming the clean steps", node.uuid)
        manager_utils.notify_conductor_resume_clean(task)
    else:
        LOG.info("provision finished on node %s; resuming the deploy steps", node.uuid)
        manager_utils.notify_conductor_resume_deploy(task)


def _json(payload):
    return json.dumps(payload, indent=1, sort_keys=True)


def _remote_dir(node, o):
    # Per node, so that one host can stand in for many ramdisks (tests, benchmark).
    return ssh.join(o.remote_dir, node.uuid)


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
        return Target(info["provision_ssh_address"],
                      int(info.get("provision_ssh_port", o.ssh_port)),
                      info.get("provision_host_key"), False)
    if dii.get(PREFIX + "ssh_address"):
        return Target(dii[PREFIX + "ssh_address"], int(dii[PREFIX + "ssh_port"]),
                      info.get("provision_host_key") or dii.get(PREFIX + "host_key"), True)
    return None


def _connect(node, target, o):
    return ssh.connect(
        target.address, target.port, node.driver_info.get("provision_ssh_user", o.ssh_user),
        ssh.load_private_key(o.ssh_private_key_file),
        host_key=target.host_key, known_hosts_file=o.ssh_known_hosts_file,
        accept_unknown=o.accept_unknown_host_keys, timeout=o.connect_timeout,
        deadline=o.connect_timeout + o.command_timeout)


def save(task, updates, touch=False, retry_lock=True):
    """Write under an exclusive lock; False when the node moved on meanwhile. touch: move the
    node's provisioning time too (timeouts.py)."""
    info = task.node.driver_internal_info
    if ramdisk_expected(task.node) and all(info.get(k) == v for k, v in updates.items()):
        # Most polls of a running provision change nothing: no lock, no database write.
        return True
    try:
        if not _take(task, updates, retry_lock):
            return False
        if touch:
            timeouts.touch(task.node)
        task.node.save()
    finally:
        # No turn is held past the write: the look may go on to SSH (a heartbeat starting
        # the job), and a slow ramdisk must not keep other nodes from being recorded.
        WRITER.leave()
    return True


def _take(task, updates, retry_lock=True):
    """The writer's turn, the exclusive lock and updates set on the node (not saved);
    False when the node moved on meanwhile."""
    WRITER.enter()
    if task.shared:
        task.upgrade_lock(purpose="recording provision progress", retry=retry_lock)
    node = task.node
    if not ramdisk_expected(node):
        return False
    for key, value in updates.items():
        node.set_driver_internal_info(key, value)
    return True


def _resume_deploy(task, spawn):
    """What the conductor's continue_node_deploy does, on the lock this task already holds.
    notify_conductor_resume_deploy would save our fields, release the lock and have the
    conductor take it again: three database writes more per node, each one that sqlite
    may refuse while another writer is in, and at 500 nodes the finished provisions queued
    up behind them. Here the resume event saves our fields with the new state, and the
    worker that runs the remaining deploy steps keeps the lock."""
    task.process_event("resume")
    task.set_spawn_error_hook(manager_utils.spawn_deploying_error_handler, task.node)
    task.spawn_after(spawn, deployments.continue_node_deploy, task)


def fail(task, message):
    """Fail the deploy or the cleaning with message in last_error."""
    WRITER.enter()
    if task.shared:
        task.upgrade_lock(purpose="failing a provision job")
    node = task.node
    if node.provision_state not in WAIT_STATES:
        return
    node.set_driver_internal_info(PREFIX + "phase", "failed")
    if node.provision_state == states.CLEANWAIT:
        manager_utils.cleaning_error_handler(task, message)
    else:
        manager_utils.deploying_error_handler(task, f"Deploy of node {node.uuid} failed: "
                                                    f"{message}", message)
