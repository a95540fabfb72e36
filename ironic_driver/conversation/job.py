"""The job's state in the node: which job a node waits for, and whether it is ours.

State kept in driver_internal_info (all keys start with provision_):
    provision_phase          wait_ramdisk | running | done | failed
    provision_started_at     time.time() of the power on into the ramdisk
    provision_job            this job's identity, also kept beside its files in the ramdisk:
                             a conductor that finds the job it would start already run
                             there (its starter died before recording it) adopts it
    provision_events         the latest provision events (JSON objects from --events_file)
    provision_events_count   how many events were seen in total
    provision_events_offset  bytes of the events file already read
    provision_exit_code      provision's exit code once it exited
    provision_done_at        time.time() when the exit 0 was recorded (or the resume last sent)
    provision_last_ssh_error why the last SSH attempt failed (while waiting for the ramdisk)
    provision_ssh_address, provision_ssh_port, provision_host_key
                             where the ramdisk's heartbeat said SSH is, and the key it reported
    provision_heartbeats     how many heartbeats this boot's ramdisk sent
    provision_start_timings  how the look that started the job spent its seconds (follow.py)
    provision_ramdisk_boot_skipped
                             prepare() left the ramdisk's boot unprepared: fast track
                             (fast_track.py) meant to reuse the running one
The four keys of the ramdisk itself (RAMDISK_KEYS: its address, port, host key, heartbeat
count) outlive a job when Ironic's fast track keeps that ramdisk running (fast_track.py).
Ironic's own agent_url and agent_verify_ca (its file of the reported key) are set too, so that
Ironic's checks for a changed callback URL or key apply; Ironic wipes them with the agent token
when a deploy or a cleaning starts.
"""

import time
import uuid

from ironic.common import states
from ironic.conf import CONF
from ironic.drivers.modules import deploy_utils

from ironic_driver import node_keys
from ironic_driver.conversation import kernel_params

PREFIX = node_keys.PREFIX
WAIT_STATES = (states.DEPLOYWAIT, states.CLEANWAIT, states.SERVICEWAIT)
# The steps whose waits are ours: (state, node field of the current step, step names).
OUR_STEPS = {states.DEPLOYWAIT: ("deploy_step", ("deploy",)),
             states.CLEANWAIT: ("clean_step", ("erase_devices_metadata", "erase_devices",
                                               "erase_devices_express")),
             # servicing an active node: only the ramdisk's vendor steps (vendor_steps.py)
             states.SERVICEWAIT: ("service_step", ())}
# which of the ramdisk's vendor steps (clean, deploy, service) each wait is for
STEP_TYPE = {states.DEPLOYWAIT: "deploy", states.CLEANWAIT: "clean",
             states.SERVICEWAIT: "service"}


def opts():
    return CONF.provision_agent     # read at call time: tests override it


def is_ours(node):
    return is_ours_info(node.driver_internal_info)


def is_ours_info(driver_internal_info):
    return (driver_internal_info or {}).get(PREFIX + "phase") in ("wait_ramdisk", "running")


def ramdisk_expected(node):
    """A ramdisk we booted may heartbeat now: its address and key are worth recording."""
    return node.provision_state in WAIT_STATES and is_ours(node)


# The vendor steps the node's ramdisk offers (vendor_steps.py), and the flag of a cleaning
# whose first job lists them.
RAMDISK_STEPS = PREFIX + "ramdisk_steps"
LISTING = PREFIX + "listing_steps"


def listing(node):
    """The job the node waits for lists its ramdisk's steps (vendor_steps.py): a cleaning's
    or a servicing's, before its first step."""
    if node.provision_state not in (states.CLEANWAIT, states.SERVICEWAIT):
        return False
    return (not getattr(node, OUR_STEPS[node.provision_state][0])
            and bool(node.driver_internal_info.get(LISTING)))


def step_is_ours(node):
    field, names = OUR_STEPS[node.provision_state]
    step = getattr(node, field) or {}
    if listing(node):
        return True
    kind = STEP_TYPE[node.provision_state]
    vendor = {s.get("step") for s in (node.driver_internal_info.get(RAMDISK_STEPS) or {}).get(
        kind, [])}
    return step.get("interface") == "deploy" and (step.get("step") in names
                                                  or step.get("step") in vendor)


def waiting(node):
    """Our job is the one the node waits for: it may be started and followed."""
    return ramdisk_expected(node) and step_is_ours(node)


def resume_grace(o):
    """How long a node may wait at our step after its job's exit 0 was recorded before the
    resume counts as lost: a few polls, far longer than the RPC that resumes takes."""
    return 3 * o.poll_interval


def resume_overdue_info(driver_internal_info, grace, now=None):
    info = driver_internal_info or {}
    return (info.get(PREFIX + "phase") == "done" and info.get(PREFIX + "exit_code") == 0
            and (now or time.time()) - info.get(PREFIX + "done_at", 0) > grace)


def resume_lost(node, grace):
    """Our job ended with 0 and that was recorded, yet the node still waits at our step: the
    resume went with a conductor that died after recording it (its RPC to itself, or its
    worker), or found no free worker. Ironic's agent does the same on a heartbeat: a wait
    whose command is over is continued."""
    return (node.provision_state in WAIT_STATES and step_is_ours(node)
            and resume_overdue_info(node.driver_internal_info, grace))


def ramdisk_options(node):
    """Kernel parameters for the ramdisk: Ironic's own (ipa-api-url), loglevel (below), and,
    for a node whose host key is pinned statically, the word that keeps the build's key (else
    the ramdisk makes a fresh one per boot and reports it in the heartbeat).

    Every boot into our ramdisk asks for these, so the tenant's words that Ironic would put
    beside them are refused here too: a cleaning runs without our validate."""
    kernel_params.check_instance_info(node.instance_info)
    options = deploy_utils.build_agent_options(node)
    # The kernel prints its whole command line at boot, at notice level, on the serial console
    # whoever watches the BMC reads; a virtual-media boot carries the agent token there.
    # loglevel=4 keeps notices off the console, as `quiet` does; warnings and errors still show.
    options["loglevel"] = "4"
    if node.driver_info.get("provision_host_key"):
        options["provision.hostkey"] = "baked"
    return options


def poll_limit():
    """How many looks at ramdisks run at once in this conductor, the sweep's and the
    heartbeats' together (fanout.FOLLOWERS)."""
    return max(1, CONF.conductor.periodic_max_workers)


# What a heartbeat told of the ramdisk that sent it (heartbeat.py): kept with Ironic's
# agent_url, which Ironic wipes whenever it powers the node off.
RAMDISK_KEYS = (PREFIX + "ssh_address", PREFIX + "ssh_port", PREFIX + "host_key",
                PREFIX + "heartbeats")


# prepare() left the ramdisk's boot unprepared: fast track meant to reuse the running one
BOOT_SKIPPED = PREFIX + "ramdisk_boot_skipped"


def reused(node):
    """The job waits in a ramdisk fast track kept running (begin(keep_ramdisk=True))."""
    info = node.driver_internal_info
    return info.get(PREFIX + "phase") == "wait_ramdisk" and bool(info.get(PREFIX + "reused"))


def begin(node, keep_ramdisk=False):
    """Mark the node as waiting for its ramdisk (called right after powering it into one).
    keep_ramdisk: the ramdisk running now is reused (fast track): what its heartbeats said
    of it is kept, and the job can start without waiting for another."""
    forget(node, keep_ramdisk)
    node.del_driver_internal_info(PREFIX + "exit_code")
    node.set_driver_internal_info(PREFIX + "phase", "wait_ramdisk")
    node.set_driver_internal_info(PREFIX + "started_at", time.time())
    node.set_driver_internal_info(PREFIX + "job", uuid.uuid4().hex)
    node.set_driver_internal_info(PREFIX + "begun_by", CONF.host)
    node.set_driver_internal_info(PREFIX + "events", [])
    node.set_driver_internal_info(PREFIX + "events_count", 0)
    node.set_driver_internal_info(PREFIX + "events_offset", 0)
    if keep_ramdisk:
        node.set_driver_internal_info(PREFIX + "reused", True)


# A ramdisk that has its token heartbeats within seconds (provision-ironic-agent: 3 s
# after its lookup, and on; IPA likewise): silence this long after a takeover means it has none.
REISSUE_AFTER = 60


def token_updates(node, now):
    """What a look at a node whose ramdisk has not heartbeated records of its agent token,
    when this conductor took over a job another one began: first the moment it took it over;
    then, silence REISSUE_AFTER seconds later, the token reissued (once per conductor).

    A lookup is answered by the conductor that owns the node: one killed after saving the
    token it made and before its answer left leaves a token no ramdisk has, and Ironic refuses
    every later lookup ("one is already present") until the deploy times out. Reissuing it,
    before any ramdisk proved itself, opens no window the deploy's first lookup did not; the
    wait keeps a ramdisk that has its token (and may be heartbeating this moment) from losing
    it to the reissue."""
    info = node.driver_internal_info
    if (not info.get("agent_secret_token") or info.get("agent_secret_token_pregenerated")
            or info.get(PREFIX + "begun_by") in (None, CONF.host)
            or info.get(PREFIX + "token_reissued_by") == CONF.host):
        return {}
    seen = info.get(PREFIX + "taken_over")
    if not seen or seen[0] != CONF.host:
        return {PREFIX + "taken_over": [CONF.host, now]}
    if now - seen[1] < REISSUE_AFTER:
        return {}
    return {"agent_secret_token": None, PREFIX + "token_reissued_by": CONF.host}


def begin_next(node):
    """begin() for the next job of ours in the ramdisk the node runs: the one a job of ours
    just ran in keeps its address and key while Ironic's agent_url says it was not powered
    off since (Ironic wipes agent_url with every power off or reboot), so the next look
    starts the job there; else the node waits for a heartbeat as after begin()."""
    same_boot = bool(node.driver_internal_info.get("agent_url"))
    begin(node, keep_ramdisk=same_boot)
    node.del_driver_internal_info(PREFIX + "reused")


def forget(node, keep_ramdisk=False):
    kept = (PREFIX + "events", PREFIX + "exit_code", PREFIX + "events_count", RAMDISK_STEPS,
            *node_keys.DOCUMENT_SIDE, *(RAMDISK_KEYS if keep_ramdisk else ()))
    for key in list(node.driver_internal_info):
        if key.startswith(PREFIX) and key not in kept:
            node.del_driver_internal_info(key)
