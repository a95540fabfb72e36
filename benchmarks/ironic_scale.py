"""Scale check (not a test): one conductor (or --conductors N), N nodes deploying at once
with the provision interface against one local sshd standing in for N ramdisks, whose
`provision` only sleeps.

    PYTHONPATH=$PWD python benchmarks/ironic_scale.py [--nodes 50] [--sleep 20] [--poll 2]
        [--workers 8] [--dead 0] [--dripping 0] [--connect-timeout 10] [--max-wait 900]
        [--database mariadb [--conductors N [--kill-after FRACTION]]]

PYTHONPATH makes the conductor load ironic_driver from this checkout; without it, it loads
the copy installed in the venv (tox installs one, not a link).

Prints the time from the deploy requests to all nodes active; the most threads the Ironic
processes had meanwhile (a conductor holding a worker per deploy would show N more) and the
most polls the driver ran at once in the worker pool (bounded by --workers, Ironic's
[conductor]periodic_max_workers); SSH connections the sshd accepted; polls per node.
--dead K adds K nodes whose "ramdisk" accepts TCP and never speaks SSH, like one still
booting: each of their polls waits connect_timeout. The run ends when the N good nodes are
done; the dead ones are left waiting.
--dripping K adds K nodes whose "ramdisk" is a second sshd whose SFTP answers come a byte
every --drip-delay seconds (tests/ironic/slow_sftp.py): each look at one runs to its deadline
(connect_timeout + --command-timeout) and their job never starts. The report then says how
many of the N good jobs' exits were noticed before --deploy-timeout failed them, and how long
after each exit (issue 52 item 8).
--heartbeat: the nodes have no provision_ssh_address; one provision-ironic-agent loop per node
(our Agent class, in threads of this process), started when that node's deploy request
returned (its ramdisk would boot then), looks its node up by a MAC of its own and heartbeats
with the sshd's port and key; the lookups and heartbeats counted are the API's log lines.
--conductors N, --kill-after F: several conductors on one MariaDB, conductor 0 killed
when F of the nodes are active; per conductor its CPU and the nodes it followed
(ironic_scale_cluster.py).
Needs root (sshd), ironic and paramiko in the running venv.
"""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from benchmarks import ironic_scale_cluster as cluster  # noqa: E402
from benchmarks.proc_tree import threads_of_tree, tree_cpu_seconds  # noqa: E402
from tests.ironic import realenv  # noqa: E402

MILESTONES = (("wait_call_back", 'to provision state "wait call-back"'),
              ("provision_started", "provision started on node"),
              ("provision_finished", "provision finished on node"),
              ("active", 'to provision state "active"'))


def log_counts(logs, sshd_log, since, t0_wall):
    """(polls per node uuid, most polls running at once, SSH connections accepted, seconds
    from t0_wall to the last log line of each milestone), counting only the conductors' log
    lines written at or after `since` (a 'YYYY-MM-DD HH:MM:SS' string)."""
    polls, running, last = collections.Counter(), 0, {}
    for at, line in cluster.stamped_lines(logs, since):
        for name, text in MILESTONES:
            if text in line:
                last[name] = max(last.get(name, 0), at - t0_wall)
        m = re.search(r"provision poll of node (\S+) in phase", line)
        if m:
            polls[m.group(1)] += 1
        m = re.search(r"handed to a worker \((\d+) running\)", line)
        if m:
            running = max(running, int(m.group(1)))
    with open(sshd_log) as f:
        connections = sum("Accepted publickey" in line for line in f)
    return polls, running, connections, last


def start_latency(logs, since, heartbeat):
    """Per node, seconds until provision started, from the moment the ramdisk could be
    reached: the first handled heartbeat, or (static address, the stand-in sshd is up from
    the start) the node reaching wait call-back. (median, max)."""
    ready_rx = (r"Node (\S+): ramdisk \(agent" if heartbeat
                else r'Node (\S+) moved to provision state "wait call-back"')
    ready, started = {}, {}
    for at, line in sorted(cluster.stamped_lines(logs, since)):
        m = re.search(ready_rx, line)
        if m:
            ready.setdefault(m.group(1), at)
        m = re.search(r"provision started on node (\S+)", line)
        if m:
            started.setdefault(m.group(1), at)
    delays = sorted(started[u] - ready[u] for u in started if u in ready)
    return (delays[len(delays) // 2], delays[-1]) if delays else (None, None)


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--sleep", type=int, default=20)
    ap.add_argument("--poll", type=int, default=2)
    ap.add_argument("--workers", type=int, default=8,
                    help="[conductor]periodic_max_workers: polls running at once")
    ap.add_argument("--clients", type=int, default=8,
                    help="deploy requests sent at once (one after the other, each API call "
                         "takes ~0.5 s here: 50 nodes needed 35 s only to be asked)")
    ap.add_argument("--dead", type=int, default=0,
                    help="extra nodes whose ramdisk never answers SSH")
    ap.add_argument("--dripping", type=int, default=0,
                    help="extra nodes whose ramdisk's SFTP answers drip a byte at a time")
    ap.add_argument("--drip-delay", type=float, default=0.5)
    ap.add_argument("--connect-timeout", type=int, default=10)
    ap.add_argument("--command-timeout", type=int, default=60)
    ap.add_argument("--deploy-timeout", type=int, default=600,
                    help="[provision_agent]deploy_timeout: silence that fails a deploy")
    ap.add_argument("--heartbeat", action="store_true",
                    help="no static address: the nodes' agents look up and heartbeat")
    ap.add_argument("--boot-delay", type=float, default=0,
                    help="seconds from a node's deploy request to its agent's start (a real "
                         "ramdisk boots for 30 s or more; 0 has the agents look up while the "
                         "conductor still holds the node)")
    ap.add_argument("--running-poll", type=int, default=30,
                    help="[provision_agent]running_poll_interval: looks at a running job whose "
                         "ramdisk heartbeats (--heartbeat); its agent heartbeats when the job "
                         "exits (default 30, the driver's)")
    ap.add_argument("--heartbeat-interval", type=float, default=60,
                    help="the agents' steady heartbeat interval (their default: 60 s)")
    ap.add_argument("--max-wait", type=float, default=900,
                    help="seconds after the first deploy request to give up and report")
    ap.add_argument("--database", choices=("sqlite", "mariadb"), default="sqlite",
                    help="Ironic's database: sqlite (the test environment's) or a throwaway "
                         "MariaDB server (scripts/host-packages.sh --bench; PyMySQL)")
    ap.add_argument("--db-pool", type=int, default=5,
                    help="[database]max_pool_size: connections the conductor keeps open (5, "
                         "oslo.db's default; each one beyond it is opened and closed per use)")
    ap.add_argument("--split-api", action="store_true",
                    help="ironic-api and ironic-conductor as two processes over JSON-RPC, as "
                         "production runs them, instead of the all-in-one `ironic`")
    cluster.add_arguments(ap)
    args = ap.parse_args()
    if args.database == "mariadb" and realenv.MariaDB.missing():
        ap.error(f"--database mariadb: {', '.join(realenv.MariaDB.missing())} missing "
                 f"(scripts/host-packages.sh --bench)")
    if cluster.check(args):
        ap.error(cluster.check(args))
    return args


def fake_provision(work, seconds):
    """The stand-in ramdisk's provision: sleeps; every start is a line in work/starts (the
    job runs in its node's directory, named by the node's UUID)."""
    path = os.path.join(work, "fake-provision")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho \"${{PWD##*/}}\" >>{work}/starts\n"
                f"echo fake provision \"$@\"\nsleep {seconds}\n"
                f"echo \"$(date +%s.%N) ${{PWD##*/}}\" >>{work}/exits\nexit 0\n")
    os.chmod(path, 0o755)
    return path


def make_ironic(args, work, sshd, mariadb):
    kwargs, conf = cluster.ironic_options(args)
    # Ironic refuses deploy requests beyond [conductor]max_concurrent_deploy (250 by
    # default): a conductor that is to take N at once has to be allowed N.
    return realenv.Ironic(work, {
        "ssh_private_key_file": sshd.client_key_file, "poll_interval": args.poll,
        "running_poll_interval": args.running_poll,
        "deploy_timeout": args.deploy_timeout, "data_driver": "native",
        "provision_command": fake_provision(work, args.sleep),
        "remote_dir": os.path.join(work, "remote"),
        "connect_timeout": args.connect_timeout, "command_timeout": args.command_timeout},
        extra_conf=f"{conf}[conductor]\nperiodic_max_workers = {args.workers}\n"
                   f"max_concurrent_deploy = "
                   f"{max(250, args.nodes + args.dead + args.dripping)}\n"
                   f"[database]\nmax_pool_size = {args.db_pool}\n",
        database=mariadb.url if mariadb else None, **kwargs)


def enroll_all(args, ironic, sshd, dripping=None):
    """(uuids of the good nodes, of the dead and dripping ones), enrolled to available."""
    with open(os.path.join(ROOT, "samples", "single-disk.json")) as f:
        layout = json.load(f)
    silent = realenv.Silent()

    def enroll(i):
        port, key = ((sshd.port, sshd.host_key) if i < args.nodes else
                     (silent.port, sshd.host_key) if i < args.nodes + args.dead else
                     (dripping.port, dripping.host_key))
        static = {"provision_ssh_address": "127.0.0.1", "provision_ssh_port": port,
                  "provision_host_key": key}
        node = ironic.request("POST", "/v1/nodes", {
            "name": f"n{i}", "driver": "fake-hardware", "deploy_interface": "provision",
            # the sample layout is a BIOS one; Ironic boots UEFI unless told otherwise
            "properties": {"capabilities": "boot_mode:bios"},
            "driver_info": {} if args.heartbeat and i < args.nodes else static,
            "instance_info": {"image_source": "http://127.0.0.1:9/i",
                              "provision_layout": layout}}).json()
        ironic.request("POST", "/v1/ports", {"node_uuid": node["uuid"], "address": _mac(i)})
        for target, state in (("manage", "manageable"), ("provide", "available")):
            ironic.set_state(node["uuid"], target)
            ironic.wait_state(node["uuid"], [state], 300)
        return node["uuid"]
    # Enrolling one node after the other took longer than the deploys themselves at
    # 500 nodes; it is set-up, outside the clock.
    t_enroll = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
        enrolled = list(pool.map(enroll, range(args.nodes + args.dead + args.dripping)))
    print(f"enrolled {len(enrolled)} nodes in {time.monotonic() - t_enroll:.0f}s", flush=True)
    return enrolled[:args.nodes], enrolled[args.nodes:]


class Run:
    """One timed run: the deploy requests, the wait for the nodes, and what was measured."""

    def __init__(self, args, work, ironic, sshd, mariadb, uuids, dead):
        self.args, self.work, self.ironic, self.sshd = args, work, ironic, sshd
        self.mariadb = mariadb
        self.uuids, self.dead = uuids, dead
        self.members = cluster.members(ironic)
        self.logs = [m.log for m in self.members]
        self.failover = (cluster.Failover(ironic, self.members, args.kill_after,
                                          tree_cpu_seconds)
                         if args.kill_after is not None else None)
        self.request_seconds, self.retried, self.refused = [], 0, []
        self.t_requested = 0.0
        self.stop = threading.Event()

    def pids(self):
        return [m.pid for m in self.members if not m.killed]

    def baseline(self):
        if self.args.conductors:
            cluster.idle_cpu(self.members, tree_cpu_seconds, self.args.idle)
        self.base_threads = sum(threads_of_tree(p) for p in self.pids())
        self.peak = self.base_threads
        with open(self.sshd.log.name) as f:
            self.base_connections = sum("Accepted publickey" in line for line in f)
        self.since = time.strftime("%Y-%m-%d %H:%M:%S")
        self.api_pid = self.ironic.api_proc.pid if self.ironic.api_proc else None
        for m in self.members:
            m.cpu0 = tree_cpu_seconds(m.pid)
        self.cpu0 = self._other_cpu()
        self.load = os.getloadavg()[0]
        self.t0, self.t0_wall = time.monotonic(), time.time()

    def _other_cpu(self):
        """CPU seconds of sshd, MariaDB and ironic-api (0 for those not running)."""
        return (tree_cpu_seconds(self.sshd.proc.pid),
                tree_cpu_seconds(self.mariadb.proc.pid) if self.mariadb else 0.0,
                tree_cpu_seconds(self.api_pid) if self.api_pid else 0.0)

    def sample_threads(self):
        # From the first request on: with 500 nodes the requests alone take minutes.
        while not self.stop.wait(0.5):
            self.peak = max(self.peak, sum(threads_of_tree(p) for p in self.pids()))

    def request(self, uuid):
        t_request = time.monotonic()
        while True:
            # Under sqlite lock contention one request took over 30 s (500 nodes).
            resp = self.ironic.set_state(uuid, "active", ok=False, timeout=300)
            # A request the API could not hand on is sent again, as a client would: the
            # killed conductor (the API's hash ring names it for up to heartbeat_timeout),
            # or a JSON-RPC connection dropped under load (one at load 30, before any kill).
            again = resp.status_code >= 500 or (
                not resp.ok and self.failover and self.failover.victim.killed)
            if not again or time.monotonic() - self.t0 > self.args.max_wait:
                break
            self.retried += 1
            time.sleep(1)
        # the ramdisk boots once the deploy powered the node on
        if self.args.heartbeat and uuid in self.uuids:
            _start_agent(self.ironic, self.sshd, self.args, self.uuids.index(uuid),
                         self.stop)
        self.request_seconds.append(time.monotonic() - t_request)
        self.t_requested = max(self.t_requested, time.monotonic() - self.t0)
        if not resp.ok:
            self.refused.append(resp.text)

    def deploy(self):
        threading.Thread(target=self.sample_threads, daemon=True).start()
        # Progress comes from Ironic's logs, not its API: GETs of 500 nodes every 0.5 s spent
        # 60 s in the API, which ran in the conductor's process, during a 315 s run.
        log = cluster.LogStates(self.logs, self.since)
        with concurrent.futures.ThreadPoolExecutor(self.args.clients) as pool:
            requests_done = pool.map(self.request, self.uuids + self.dead)
            while True:
                # the kill may come before the last request is sent
                log.read()
                if self.failover:
                    self.failover.step(log, self.uuids)
                done = log.count(self.uuids, ("active",))
                done += (self.failover.given_up(log, self.uuids) if self.failover
                         else log.count(self.uuids, ("deploy failed",)))
                if done == len(self.uuids) or time.monotonic() - self.t0 > self.args.max_wait:
                    break
                time.sleep(0.5)
            list(requests_done)
        self.elapsed = time.monotonic() - self.t0
        self.stop.set()
        for m in self.members:
            if not m.killed:
                m.cpu = tree_cpu_seconds(m.pid) - m.cpu0
        self.cpu = [b - a for a, b in zip(self.cpu0, self._other_cpu())]


def report(run):
    args, ironic = run.args, run.ironic
    nodes = ironic.get("/v1/nodes?fields=uuid,provision_state")["nodes"]
    states = collections.Counter(n["provision_state"] for n in nodes if n["uuid"] in run.uuids)
    dead_states = collections.Counter(n["provision_state"] for n in nodes
                                      if n["uuid"] in run.dead)
    polls, running, connections, last = log_counts(run.logs, run.sshd.log.name, run.since,
                                                   run.t0_wall)
    with open(ironic.log_file) as f:
        api = [line for line in f if line[:19] >= run.since and "ironic.api" in line]
    lookups = sum("GET /v1/lookup" in line for line in api)
    heartbeats = sum("POST /v1/heartbeat" in line for line in api)
    per_node = sorted(polls[u] for u in run.uuids)
    noticed = exit_notice(run.logs, run.since, os.path.join(run.work, "exits"))
    median, worst = start_latency(run.logs, run.since, args.heartbeat)
    cpu = run.cpu
    conductor_cpu = sum(m.cpu for m in run.members)
    print(f"mode={'heartbeat' if args.heartbeat else 'static address'} "
          f"boot_delay={args.boot_delay}s "
          f"api_lookups={lookups} api_heartbeats={heartbeats}\n"
          f"ramdisk_reachable_to_provision_started median={median:.1f}s max={worst:.1f}s")
    print(f"nodes={args.nodes} provision_sleep={args.sleep}s poll={args.poll}s "
          f"running_poll={args.running_poll}s "
          f"workers={args.workers} states={dict(states)}\n"
          f"dead={args.dead} connect_timeout={args.connect_timeout}s "
          f"dead_states={dict(dead_states)} dead_polls="
          f"{sum(polls[u] for u in run.dead)}\n"
          f"time_to_all_done={run.elapsed:.1f}s (deploy requests took {run.t_requested:.1f}s "
          f"with {args.clients} clients, {len(run.refused)} refused {run.refused[:1]}, "
          f"{run.retried} sent again; "
          f"one request median {_median(run.request_seconds):.2f}s "
          f"max {max(run.request_seconds):.2f}s)\n"
          f"ironic_threads before={run.base_threads} peak={run.peak} "
          f"(+{run.peak - run.base_threads}); polls_running_at_once_max={running}\n"
          f"last node reached (s from the first request): "
          f"{', '.join(f'{k} {v:.1f}' for k, v in last.items())}\n"
          f"ssh_connections={connections - run.base_connections} "
          f"({(connections - run.base_connections) / args.nodes:.2f} per node)\n"
          f"database={args.database} db_pool={args.db_pool} "
          f"ironic={_shape(args)}\n"
          f"cpu_seconds ironic={conductor_cpu:.1f}"
          + (" (conductors)" if args.conductors else " (conductor)" if run.api_pid else "")
          + (f" ironic-api={cpu[2]:.1f}" if run.api_pid else "") +
          f" sshd={cpu[0]:.1f}"
          + (f" mariadb={cpu[1]:.1f}" if run.mariadb else "") + " "
          f"(load average before {run.load:.1f}, 2 cores shared with other work)\n"
          f"polls_per_node min={per_node[0]} median={per_node[len(per_node) // 2]} "
          f"max={per_node[-1]} total={sum(per_node)} "
          f"({sum(per_node) / args.nodes:.2f} per node)")
    if args.dripping:
        print(f"dripping={args.dripping} drip_delay={args.drip_delay}s look deadline="
              f"{args.connect_timeout + args.command_timeout}s deploy_timeout="
              f"{args.deploy_timeout}s: good jobs exited={len(noticed[0])} exits noticed="
              f"{len(noticed[1])} never noticed={len(set(noticed[0]) - set(noticed[1]))}\n"
              f"exit to noticed: {_spread(noticed[1].values())}")
    if args.conductors:
        print(cluster.report(run.members, run.uuids, cluster.followers(run.members, run.since),
                             cluster.starts(os.path.join(run.work, "starts")), run.failover,
                             run.t0_wall, run.elapsed))


def _shape(args):
    if args.conductors:
        return f"ironic-api + {args.conductors} ironic-conductor"
    return "ironic-api + ironic-conductor" if args.split_api else "all-in-one"


def main():
    args = parse_args()
    work = tempfile.mkdtemp(prefix="ironic-scale-")
    sshd = realenv.Sshd(work).start()
    mariadb = realenv.MariaDB(work).start() if args.database == "mariadb" else None
    ironic = make_ironic(args, work, sshd, mariadb)
    dripping = _dripping_sshd(sshd, work, args.drip_delay) if args.dripping else None
    try:
        ironic.start()
        if args.conductors:
            # every hash ring (the API's, each conductor's) rebuilt with every conductor
            time.sleep(2)
        uuids, dead = enroll_all(args, ironic, sshd, dripping)
        run = Run(args, work, ironic, sshd, mariadb, uuids, dead)
        run.baseline()
        run.deploy()
        report(run)
    finally:
        ironic.stop()
        sshd.stop()
        if dripping:
            dripping.stop()
        if mariadb:
            mariadb.stop()
        print(f"workdir {work}")


def exit_notice(logs, since, exits_file):
    """({uuid: when its job exited}, {uuid: seconds from its exit to the conductor's log line
    saying it finished}) for the good nodes whose fake provision exited."""
    exited = {}
    if os.path.exists(exits_file):
        with open(exits_file) as f:
            for line in f:
                at, uuid = line.split()
                exited[uuid] = float(at)
    noticed = {}
    for at, line in cluster.stamped_lines(logs, since):
        m = re.search(r"provision finished on node ([0-9a-f-]{36})", line)
        if m and m.group(1) in exited:
            noticed.setdefault(m.group(1), at - exited[m.group(1)])
    return exited, noticed


def _spread(values):
    values = sorted(values)
    if not values:
        return "none"
    return (f"median {values[len(values) // 2]:.1f}s max {values[-1]:.1f}s "
            f"(n={len(values)})")


def _median(values):
    return sorted(values)[len(values) // 2]


def _dripping_sshd(sshd, work, delay):
    """A second sshd whose SFTP answers drip; the conductor's key of sshd opens it too."""
    script = os.path.join(ROOT, "tests", "ironic", "slow_sftp.py")
    work = os.path.join(work, "dripping")
    os.makedirs(work)
    drip = realenv.Sshd(work, sftp=f"{sys.executable} {script} {delay}")
    drip.start()
    with open(sshd.client_key_file + ".pub") as key, \
            open(os.path.join(drip.dir, "authorized_keys"), "a") as keys:
        keys.write(key.read())
    return drip


def _mac(i):
    return f"52:54:01:00:{i // 256:02x}:{i % 256:02x}"


def _start_agent(ironic, sshd, args, i, stop):
    """Node i's agent loop, in a thread: what its ramdisk would send."""
    from provision_agent.agent import ironic as ironic_agent
    agent = ironic_agent.Agent(ironic.url, [_mac(i)], ssh_port=sshd.port,
                               host_key=sshd.host_key, address="127.0.0.1",
                               interval=args.heartbeat_interval,
                               binding_dir=ironic.binding_dir,
                               job_dir=os.path.join(os.path.dirname(ironic.dir), "remote"))
    timer = threading.Timer(args.boot_delay, agent.run, kwargs={"stop": stop.is_set})
    timer.daemon = True
    timer.start()


if __name__ == "__main__":
    main()
