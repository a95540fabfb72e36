"""How long a deploy or a cleaning may wait for progress, measured the way Ironic measures it.

Ironic fails a node that stays in wait call-back (clean wait) longer than
[conductor]deploy_callback_timeout (clean_callback_timeout) since its provision_updated_at,
which only a state change or touch_provisioning() moves. ironic-python-agent's heartbeats
touch it. Here a look that sees provision make progress (it started, or wrote new events)
touches it in the same write that records the progress, so Ironic's timeout, and ours, count
silence: a provision that keeps reporting runs as long as it needs.

Heartbeats alone do not touch it (unlike IPA's): a ramdisk that heartbeats while its SSH
cannot be reached is not making progress, and must time out.
"""

from ironic.common import states
from ironic.conf import CONF
from oslo_utils import timeutils


def limit(node, o):
    """(seconds or 0 for none, where the number comes from) for the state the node waits in."""
    if o.deploy_timeout:
        return o.deploy_timeout, "[provision_agent]deploy_timeout"
    if node.provision_state == states.CLEANWAIT:
        return CONF.conductor.clean_callback_timeout, "[conductor]clean_callback_timeout"
    if node.provision_state == states.SERVICEWAIT:
        return CONF.conductor.service_callback_timeout, "[conductor]service_callback_timeout"
    return CONF.conductor.deploy_callback_timeout, "[conductor]deploy_callback_timeout"


def expired(node, o):
    """None, or (seconds the node was silent, its limit, where the limit comes from).

    With Ironic's own limit, the node is failed before Ironic's periodic check would fail it
    with "Timeout reached while waiting for callback": the same moment, give or take the two
    checks' intervals, but with the reason in last_error. The margin is the longest a node
    may go between two looks (running_poll_interval, deploy.sweep_order, and the sweep's own
    poll_interval), so that one of them falls inside it."""
    seconds, source = limit(node, o)
    if not seconds:
        return None
    margin = 0 if o.deploy_timeout else min(o.poll_interval + o.running_poll_interval,
                                            seconds // 2)
    silent = silent_for(node)
    if silent > seconds - margin:
        return int(silent), seconds, source
    return None


def silent_for(node):
    """Seconds since the node's provisioning time was last moved."""
    updated = node.provision_updated_at
    if updated is None:
        return 0.0
    return (timeutils.utcnow() - timeutils.normalize_time(updated)).total_seconds()


def touch(node):
    """What touch_provisioning() does, without its own save: the caller saves."""
    node.provision_updated_at = timeutils.utcnow()
