"""Several conductors for ironic_scale.py: `--conductors N` (ironic-api and N ironic-conductor
processes over JSON-RPC on one MariaDB) and `--kill-after F` (SIGKILL conductor 0 once that
fraction of the nodes is active), and what the conductors' logs say about who followed which
node.

The cluster is the failover tests' (tests/ironic/conductors.py): each conductor a host of its
own on the loopback network, heartbeats every second, gone after HEARTBEAT_TIMEOUT (6 s),
hash rings rebuilt every second. Production's heartbeat_timeout is 60 s: the orphan times
measured here are that much shorter than a production failover's.

Who followed a node is read from the lines ironic_driver/conversation/follow.py logs when it
looks at one ("provision poll of node U in phase P", debug) or starts its job: a node is
followed twice when two conductors looked at it while both were alive.
"""

import collections
import os
import re
import time

from tests.ironic import conductors as failover_conf

POLL_RX = re.compile(r"provision poll of node (\S+) in phase")
STATE_RX = re.compile(r'Node (\S+) moved to provision state "([^"]+)"')


def add_arguments(ap):
    ap.add_argument("--conductors", type=int, default=None,
                    help="ironic-api and N ironic-conductor processes over JSON-RPC with the "
                         "failover tests' heartbeat and hash-ring settings (needs --database "
                         "mariadb); 1 is the same set-up with one conductor")
    ap.add_argument("--kill-after", type=float, default=None, metavar="FRACTION",
                    help="SIGKILL conductor 0 once this fraction of the nodes is active "
                         "(--conductors 2 or more); nodes Ironic fails in the takeover are "
                         "deployed again")
    ap.add_argument("--idle", type=float, default=15,
                    help="seconds to measure the conductors' CPU with nothing deploying, "
                         "before the deploy requests (--conductors)")


def check(args):
    """An error message for options that do not go together, else None."""
    if args.conductors is None:
        return "--kill-after needs --conductors" if args.kill_after is not None else None
    if args.database != "mariadb":
        return "--conductors: several processes on one database need --database mariadb"
    if args.kill_after is not None and args.conductors < 2:
        return "--kill-after needs a conductor to take the nodes over: --conductors 2 or more"
    return None


def ironic_options(args):
    """realenv.Ironic's keyword arguments and its extra configuration for args."""
    if args.conductors is None:
        return {"split_api": args.split_api}, ""
    return {"split_api": True, "conductors": args.conductors}, failover_conf.FAILOVER_OPTIONS


class Member:
    """One ironic-conductor: its host name, the pid of its process tree and its log."""

    def __init__(self, index, host, pid, log):
        self.index, self.host, self.pid, self.log = index, host, pid, log
        self.cpu0 = self.cpu = self.idle = 0.0
        self.killed = None      # wall time of the SIGKILL


def members(ironic):
    """The conductors of a realenv.Ironic in start order; one conductor (or the all-in-one
    ironic) logs to ironic.log."""
    if not ironic.conductor_confs:
        return [Member(0, "conductor", ironic.proc.pid, ironic.log_file)]
    return [Member(i, host, ironic.conductor_procs[host].pid,
                   os.path.join(ironic.dir, f"conductor-{i}.log"))
            for i, (host, _) in enumerate(ironic.conductor_confs)]


def idle_cpu(members, cpu, seconds):
    """Each conductor's CPU seconds per second with the nodes enrolled and nothing deploying:
    its heartbeats, hash ring rebuilds and periodic tasks, which every conductor pays for
    whatever it deploys (the failover settings run them every second or two)."""
    before = [cpu(m.pid) for m in members]
    time.sleep(seconds)
    for m, b in zip(members, before):
        m.idle = (cpu(m.pid) - b) / seconds


def stamp(line):
    """A log line's wall time (its first 23 characters: 'YYYY-MM-DD HH:MM:SS.mmm')."""
    return time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + float(line[19:23])


def stamped_lines(paths, since):
    """(wall time, line) of the log lines written at or after since ('YYYY-MM-DD HH:MM:SS'),
    of every file in paths; continuation lines (tracebacks) are left out."""
    for path in paths:
        with open(path) as f:
            for line in f:
                if line[:19] >= since and line[:4].isdigit():
                    yield stamp(line), line


class LogStates:
    """The provision state of each node as the conductors' logs last said it, read as they
    grow. Lines of several logs are ordered by their time stamps."""

    def __init__(self, paths, since):
        self.since, self.state = since, {}
        self.files = [[open(path), ""] for path in paths]

    def read(self):
        for entry in self.files:
            lines = (entry[1] + entry[0].read()).split("\n")
            entry[1] = lines.pop()      # a line still being written
            for line in lines:
                if line[:19] < self.since or not line[:4].isdigit():
                    continue
                m = STATE_RX.search(line)
                if m:
                    at = stamp(line)
                    if at >= self.state.get(m.group(1), (0, ""))[0]:
                        self.state[m.group(1)] = (at, m.group(2))
        return self

    def of(self, uuid):
        return self.state.get(uuid, (0, None))[1]

    def count(self, uuids, states):
        return sum(self.of(u) in states for u in uuids)


def followers(members, since):
    """{node uuid: {conductor index: [wall times of its looks at the node]}}."""
    seen = collections.defaultdict(lambda: collections.defaultdict(list))
    for member in members:
        for at, line in stamped_lines([member.log], since):
            m = POLL_RX.search(line)
            if m:
                seen[m.group(1)][member.index].append(at)
    return seen


def followed_twice(seen, members):
    """Nodes that two conductors looked at while both were alive: a look by each before the
    other one was killed."""
    death = {m.index: m.killed or float("inf") for m in members}
    twice = []
    for uuid, by in seen.items():
        first = {index: min(times) for index, times in by.items()}
        if any(first[a] < death[b] and first[b] < death[a]
               for a in first for b in first if a < b):
            twice.append(uuid)
    return twice


def starts(path):
    """How many times the stand-in's provision started, per node (one line per start)."""
    try:
        with open(path) as f:
            return collections.Counter(line.strip() for line in f if line.strip())
    except FileNotFoundError:
        return collections.Counter()


class Failover:
    """Kills conductor 0 once `fraction` of the nodes is active, and deploys again the nodes
    Ironic fails in the takeover (a node its dead conductor left in DEPLOYING: Ironic's orphan
    check fails it, whatever the deploy interface; tests/ironic/integration/test_failover.py),
    as a client that wants the node would."""

    REDEPLOYS = 2

    def __init__(self, ironic, members, fraction, cpu):
        self.ironic, self.victim, self.fraction, self.cpu = ironic, members[0], fraction, cpu
        self.at_kill = {}       # uuid -> provision state, of the nodes mapped onto the victim
        self.redeployed = collections.Counter()
        self.pending = set()    # asked again, not yet seen out of deploy failed
        self.failed = {}        # uuid -> last_error when first asked again

    def step(self, log, uuids):
        """Called with the states read from the logs, every half second of the run."""
        if self.victim.killed is None:
            if log.count(uuids, ("active",)) >= self.fraction * len(uuids):
                self.kill()
            return
        for uuid in uuids:
            if log.of(uuid) != "deploy failed":
                self.pending.discard(uuid)
            elif uuid not in self.pending and self.redeployed[uuid] < self.REDEPLOYS:
                self.failed.setdefault(uuid, self.ironic.node(uuid)["last_error"])
                # a refused request (the node still locked) is asked again half a second on
                if self.ironic.set_state(uuid, "active", ok=False, timeout=300).ok:
                    self.redeployed[uuid] += 1
                    self.pending.add(uuid)

    def given_up(self, log, uuids):
        """Failed nodes that will not be asked again (count as done)."""
        return sum(log.of(u) == "deploy failed" and u not in self.pending
                   and self.redeployed[u] >= self.REDEPLOYS for u in uuids)

    def kill(self):
        victim = self.victim
        # the API's own hash ring decides what the filter returns (the field is not listed)
        nodes = self.ironic.get(f"/v1/nodes?conductor={victim.host}"
                                "&fields=uuid,provision_state")["nodes"]
        self.at_kill = {n["uuid"]: n["provision_state"] for n in nodes}
        victim.cpu = self.cpu(victim.pid) - victim.cpu0
        self.ironic.kill_conductor(victim.host)
        victim.killed = time.time()
        print(f"killed conductor 0 ({victim.host}) with SIGKILL; "
              f"{len(self.at_kill)} nodes mapped onto it: "
              f"{dict(collections.Counter(self.at_kill.values()))}", flush=True)

    def orphaned(self, seen):
        """{provision state at the kill: [seconds from the kill until another conductor first
        looked at the node, or None]} of the victim's nodes that were not active."""
        out = collections.defaultdict(list)
        for uuid, state in self.at_kill.items():
            if state == "active":
                continue
            later = [at for index, times in seen.get(uuid, {}).items()
                     if index != self.victim.index for at in times if at >= self.victim.killed]
            out[state].append(min(later) - self.victim.killed if later else None)
        return out


def report(members, uuids, seen, started, failover, t0_wall, elapsed):
    """The per-conductor lines of the benchmark's output."""
    nodes = len(uuids)
    lines, overhead = [], 0.0
    for m in members:
        followed = sum(m.index in seen.get(u, {}) for u in uuids)
        alive = (m.killed - t0_wall) if m.killed else elapsed
        overhead += m.idle * alive
        killed = f" killed at {alive:.1f}s (CPU until then)" if m.killed else ""
        lines.append(f"conductor {m.index} {m.host}: cpu_seconds={m.cpu:.1f} "
                     f"idle_cpu_per_second={m.idle:.3f} nodes_followed={followed}{killed}")
    total = sum(m.cpu for m in members)
    twice = followed_twice(seen, members)
    once = sum(started[u] == 1 for u in uuids)
    lines.append(f"conductors={len(members)} cpu_seconds_sum={total:.1f} "
                 f"per_node_conductor_cpu={total / nodes:.3f}s "
                 f"(above the idle rate: {(total - overhead) / nodes:.3f}s) "
                 f"followed_by_two_alive_conductors={len(twice)} {twice[:3]}")
    lines.append(f"provision_started_exactly_once={once}/{nodes} starts="
                 f"{dict(sorted(collections.Counter(started[u] for u in uuids).items()))}")
    if failover:
        lines += _failover_lines(failover, seen)
    return "\n".join(lines)


def _failover_lines(failover, seen):
    lines = []
    for state, delays in sorted(failover.orphaned(seen).items()):
        taken = sorted(d for d in delays if d is not None)
        spread = (f"median={_median(taken):.1f}s max={taken[-1]:.1f}s" if taken else "-")
        lines.append(f"orphaned (kill -> another conductor's first look), {state} at the kill: "
                     f"{len(delays)} nodes, {len(taken)} taken over, {spread}")
    errors = collections.Counter((e or "")[:120] for e in failover.failed.values())
    lines.append(f"deployed_again={len(failover.failed)} "
                 f"(asked {sum(failover.redeployed.values())} times) "
                 f"errors={dict(errors)}")
    return lines


def _median(values):
    return sorted(values)[len(values) // 2]
