"""The look that starts a job in the ramdisk: which job the node's step asks for (provision
with the deploy's document, or `provision erase`), the binding checked, the upload and the
start over one SSH session, and where the seconds went from the heartbeat to the start.

Used by every look that starts a job: the one a heartbeat brings (heartbeat.py), the sweep's
(follow.py), and the step that starts it in a ramdisk fast track kept (fast_track.py).
"""

import json
import logging
import time

from ironic.common import states
from ironic.conf import CONF

from ironic_driver.conversation import (
    dispatched,
    job,
    remote,
    ssh,
    vendor_steps,
)

LOG = logging.getLogger(__name__)
PREFIX = job.PREFIX

# clean step -> provision erase's method (the metadata erase for any other)
ERASE_METHODS = {"erase_devices": "full", "erase_devices_express": "express"}


def job_for(node, o, provision_input):
    """(what runs, its command, its input document, the keyring sent beside it) for the step
    the node is in (a cleaning's, or the deploy's): the listing of the ramdisk's vendor
    steps or one of them (vendor_steps.py), an erase, or the deploy's provision."""
    vendor = _vendor_job(node, o)
    if vendor:
        return vendor
    if node.provision_state in (states.CLEANWAIT, states.CLEANING):
        return ("erase", remote.provision_argv(o.provision_command, None,
                                               o.provision_extra_args, subcommand="erase"),
                _json(erase_input(node)), None)
    doc, keyring = provision_input(node, o)
    return ("provision", remote.provision_argv(o.provision_command, o.data_driver,
                                               o.provision_extra_args), _json(doc), keyring)


def _vendor_job(node, o):
    if job.listing(node):
        what, doc = "steps", {}
    elif vendor_steps.request(node):
        what, doc = "step", vendor_steps.request(node)
    else:
        return None
    return (what, remote.provision_argv(o.provision_command, None, o.provision_extra_args,
                                        subcommand=what), _json(doc), None)


def erase_input(node):
    """`provision erase`'s input for the clean step the node is in."""
    doc = {"skip_block_devices": node.properties.get("skip_block_devices") or []}
    method = ERASE_METHODS.get((node.clean_step or {}).get("step"))
    if method:
        doc["method"] = method
        # Ironic's own options for ironic-python-agent's overwrite; ours always ends in zeros
        doc["overwrite_passes"] = min(32, 1 + CONF.deploy.shred_random_overwrite_iterations)
    return doc


class Timings:
    """Where the seconds between a heartbeat and the job's start went, for the node's
    provision_start_timings and the conductor's log: waiting for the look (a worker, the
    node's lock), the SSH connection, the document's making, and the start (the binding's
    check, the upload and the start: one command over the session)."""

    def __init__(self, heard, began):
        self.last = heard
        self.parts = {}
        self.mark("to_look", began)

    def mark(self, name, now=None):
        now = time.monotonic() if now is None else now
        self.parts[name] = round(now - self.last, 3)
        self.last = now

    def summary(self):
        return dict(self.parts, total=round(sum(self.parts.values()), 3))


def start_checked(session, node, target, o, provision_input, clock):
    """The binding checked (for a ramdisk a heartbeat named: target.reported), then the job
    started; True when it started now, False when that job was running or done there
    already. remote.BadRamdisk, and the session's errors, before anything was sent. The
    check and the start are one command over the session unless a keyring goes with the
    document or the ramdisk serves registered commands (remote.start_bound)."""
    clock.mark("connect")
    job_spec = job_for(node, o, provision_input)
    clock.mark("document")
    bound = ((o.binding_dir, node.uuid, node.driver_internal_info.get("agent_secret_token")
              or "") if target.reported else None)
    fresh = _start(session, node, o, job_spec, bound)
    clock.mark("start")
    return fresh


def started(node, clock, since="the heartbeat"):
    """What a look that started the job records; its timings are logged too. since: what
    the clock counts from (the heartbeat, or the step that started a fast-tracked job)."""
    timings = clock.summary()
    LOG.info("Node %s: job started %.3f s after %s (%s)", node.uuid, timings["total"], since,
             ", ".join(f"{k} {v:.3f} s" for k, v in clock.parts.items()))
    return {PREFIX + "phase": "running", PREFIX + "last_ssh_error": None,
            PREFIX + "start_timings": timings}


def _start(session, node, o, job_spec, bound):
    what, command, text, keyring = job_spec
    job = node.driver_internal_info.get(PREFIX + "job")
    if o.ramdisk_commands:
        if bound:
            remote.verify_binding(session, *bound)
        update_from = ((o.agent_update_wheel, o.agent_update_signature)
                       if o.agent_update_wheel else None)
        answer = dispatched.check_version(session, update_from, node.uuid)
        LOG.info("Node %s: its ramdisk runs provision %s, dispatcher protocol %s", node.uuid,
                 str(answer.get("provision"))[:40], answer["protocol"])
        fresh = dispatched.start(session, what, node.uuid, job, text,
                                 o.data_driver, o.provision_extra_args, keyring)
    else:
        fresh = remote.start(session, remote_dir(node, o), text, command, job=job,
                             keyring=keyring, bound=bound)
    if fresh:
        LOG.info("%s started on node %s", what, node.uuid)
        return True
    LOG.warning("%s was already running, or had finished, on node %s (started by a poll "
                "whose progress was not saved, e.g. by a conductor that died); following "
                "that one", what, node.uuid)
    return False


def _json(payload):
    return json.dumps(payload, indent=1, sort_keys=True)


def remote_dir(node, o):
    # Per node, so that one host can stand in for many ramdisks (tests, benchmark).
    return ssh.join(o.remote_dir, node.uuid)
