"""Which look at a ramdisk waits, and for which share of the conductor's workers.

A look at an honest ramdisk takes a fraction of a second. One at a ramdisk that drips its
answers holds a worker until the look's deadline (connect_timeout + command_timeout, 70 s by
default), and one that accepts the connection and never speaks SSH for connect_timeout. With
[conductor]periodic_max_workers (8) workers, 16 such ramdisks kept every worker and the jobs
that had exited were never seen before their deploys timed out (issue 52 item 8). So:

  - a node whose look failed after its ramdisk accepted the connection and held the worker
    connect_timeout or longer is slow: provision_slow_looks rises by 2 with each such look
    and falls by 1 with each look that completes (a ramdisk that answers every other look
    stays slow);
  - a slow node waits longer between looks (interval x 2^count, up to the longer of
    poll_interval and running_poll_interval: the most timeouts.expired allows between two
    looks, so that the look that fails it on time still comes), comes last in a sweep, is
    never looked at from a heartbeat, and the slow nodes' looks together hold at most a
    quarter of the workers (what protects the others: the back-off only spares work);
  - while a look has held its worker connect_timeout or longer, or a slow node's look runs,
    looks that start jobs hold at most the workers less a quarter: the rest is kept for the
    running jobs, whose exits resume deploys. (Otherwise starts may take every worker: a
    burst of honest starts is done sooner, and each takes a fraction of a second.)

The count lives in the node (driver_internal_info), so every conductor that takes the node
over knows it; it is forgotten with the job (job.forget).
"""

from ironic_driver.conversation import job

SLOW = job.PREFIX + "slow_looks"
# The tags of a look (fanout.FanOut), each with its own share of the workers.
STARTING, SLOW_TAG = "starting", "slow"


def slow(info):
    return bool((info or {}).get(SLOW))


def after_look(info, failed, unreachable=False, seconds=0.0, deadline=False, o=None):
    """The update of provision_slow_looks a look makes: {} when it does not change."""
    count = (info or {}).get(SLOW) or 0
    if failed:
        if unreachable or not (deadline or seconds >= o.connect_timeout):
            return {}
        new = count + 2
    else:
        new = max(0, count - 1)
    if new == count:
        return {}
    return {SLOW: new or None}


def wait(info, interval, running_interval):
    """Seconds a node waits after its last look ended before the next is due."""
    count = (info or {}).get(SLOW) or 0
    if not count:
        return interval
    return min(interval * 2 ** count, max(interval, running_interval))


def shares(limit, strained=True):
    """{tag: the most looks with that tag at once} for `limit` looks at once; strained: a
    look has held its worker long (followers.strained)."""
    quarter = max(1, limit // 4)
    starting = max(1, limit - quarter) if strained and limit > 1 else limit
    return {STARTING: starting, SLOW_TAG: quarter}


def strained(followers, o):
    return followers.strained(o.connect_timeout, SLOW_TAG)


def tags(starting, is_slow):
    return frozenset(t for t, on in ((STARTING, starting), (SLOW_TAG, is_slow)) if on)
