"""Ironic as production runs it, for the conductor failover tests: ironic-api and two
ironic-conductor processes (each its own host name, JSON-RPC port, log, lock and certificate
directories) over one MariaDB, noauth, the `provision` deploy interface; and a stand-in
ramdisk (a local sshd) whose `provision` is a script the test steers per node.

Failover in seconds instead of minutes: conductors heartbeat every second and count as gone
after FAILOVER_OPTIONS' heartbeat_timeout; hash rings (the API's and the conductors') are
rebuilt every second; the orphan check that frees a dead conductor's locks (and fails what
it left in DEPLOYING or CLEANING) and the takeover of active nodes run every second or two.
"""

import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import threading
import time

from tests.ironic import realenv

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LAYOUT = os.path.join(ROOT, "samples", "single-disk.json")

HEARTBEAT_TIMEOUT = 6
FAILOVER_OPTIONS = f"""[DEFAULT]
hash_ring_reset_interval = 1
[conductor]
heartbeat_interval = 1
heartbeat_timeout = {HEARTBEAT_TIMEOUT}
check_provision_state_interval = 1
sync_local_state_interval = 2
[api]
# ironic-api's default is a worker per CPU, all binding one port: the second one's start fails
# and is retried for as long as the API runs, on a 2-core machine
api_workers = 1
"""

# The stand-in ramdisk's provision (and `provision erase`): what it does is chosen per node by
# files in the control directory (Jobs), and every start is counted there.
#   long   an event every 0.3 s until finish-<node> exists, then one more
#   gated  two events, then waits for finish-<node>, then one more
#   quick  two events
# Every event is numbered: the conductor's record of them must be the file, in order, once.
FAKE = """#!/bin/sh
node=${PWD##*/}
ctl=CONTROL
while [ $# -gt 0 ]; do
    case "$1" in --events_file) events="$2"; shift;; esac
    shift
done
echo $$ >>"$ctl/starts-$node"
n=0
emit() { echo '{"event": "fake", "n": '$n'}' >>"$events"; n=$((n + 1)); }
case "$(cat "$ctl/kind-$node")" in
long)
    while [ ! -e "$ctl/finish-$node" ]; do emit; sleep 0.3; done
    emit;;
gated)
    emit; emit
    while [ ! -e "$ctl/finish-$node" ]; do sleep 0.1; done
    emit;;
quick)
    emit; emit;;
esac
exit 0
"""


class Jobs:
    """The control directory of the stand-in ramdisk's provision (FAKE) and what it left."""

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "control")
        self.remote_dir = os.path.join(workdir, "remote")
        os.makedirs(self.dir, exist_ok=True)
        os.makedirs(self.remote_dir, exist_ok=True)
        self.command = os.path.join(workdir, "provision")
        with open(self.command, "w") as f:
            f.write(FAKE.replace("CONTROL", self.dir))
        os.chmod(self.command, 0o755)

    def _touch(self, name, text=""):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def kind(self, node, kind):
        self._touch(f"kind-{node}", kind)

    def finish(self, node):
        self._touch(f"finish-{node}")

    def hold(self, node):
        """The conductor that starts node's job stops before it reads it back (held_sftp)."""
        self._touch(f"hold-{node}")

    def release(self, node):
        os.unlink(os.path.join(self.dir, f"hold-{node}"))

    def starts(self, node):
        """How many times provision was started for node."""
        try:
            with open(os.path.join(self.dir, f"starts-{node}")) as f:
                return len(f.read().split())
        except FileNotFoundError:
            return 0

    def events(self, node):
        """The job's events file as written in the ramdisk, one dict a line."""
        try:
            with open(os.path.join(self.remote_dir, node, "events.jsonl")) as f:
                return [json.loads(line) for line in f]
        except FileNotFoundError:
            return []


class Cluster:
    """MariaDB, ironic-api and `conductors` ironic-conductor processes; ramdisk: the
    realenv.Sshd the nodes' driver_info points at. conductor_extra[N]: conductor N's own
    settings."""

    def __init__(self, workdir, ramdisk, jobs, conductors=2, conductor_extra=(),
                 provision_opts=None):
        self.ramdisk = ramdisk
        self.jobs = jobs
        self.mariadb = realenv.MariaDB(workdir)
        opts = {"ssh_private_key_file": ramdisk.client_key_file, "poll_interval": 1,
                "connect_timeout": 5, "command_timeout": 30, "data_driver": "native",
                "provision_command": jobs.command, "remote_dir": jobs.remote_dir,
                # every event stays in driver_internal_info: the tests compare them all
                "events_kept": 1000}
        opts.update(provision_opts or {})
        self.ironic = realenv.Ironic(workdir, opts, extra_conf=FAILOVER_OPTIONS,
                                     database=self.mariadb.url, split_api=True,
                                     conductors=conductors, conductor_extra=conductor_extra)

    def start(self):
        self.mariadb.start()
        self.ironic.start()     # returns once every conductor is registered and alive
        # The API and the conductors map nodes by hash rings of their own, built at first use
        # and rebuilt every hash_ring_reset_interval (1 s): by now each holds every conductor.
        time.sleep(2)
        return self

    @property
    def hosts(self):
        return [host for host, _ in self.ironic.conductor_confs]

    def stop(self):
        self.ironic.stop()
        self.mariadb.stop()

    def create_on(self, host, name, instance_info=None, interfaces=None, tries=40):
        """A node that the hash ring maps onto conductor host (created, looked at, deleted
        and created anew under another UUID until it is), enrolled to manageable."""
        ironic = self.ironic
        driver_info = {"provision_ssh_address": "127.0.0.1",
                       "provision_ssh_port": self.ramdisk.port,
                       "provision_host_key": self.ramdisk.host_key}
        for attempt in range(tries):
            node = ironic.request("POST", "/v1/nodes", {
                "name": f"{name}-{attempt}", "driver": "fake-hardware",
                "deploy_interface": "provision", "driver_info": driver_info,
                "properties": {"capabilities": "boot_mode:bios"},
                **{f"{k}_interface": v for k, v in (interfaces or {}).items()}}).json()
            if ironic.node(node["uuid"])["conductor"] == host:
                break
            ironic.request("DELETE", f"/v1/nodes/{node['uuid']}")
        else:
            raise RuntimeError(f"no node mapped onto {host} in {tries} tries")
        uuid = node["uuid"]
        if instance_info:
            ironic.request("PATCH", f"/v1/nodes/{uuid}", [
                {"op": "add", "path": f"/instance_info/{k}", "value": v}
                for k, v in instance_info.items()])
        ironic.set_state(uuid, "manage")
        ironic.wait_state(uuid, ["manageable"], 30)
        return uuid

    def kill(self, host):
        """SIGKILL every process of conductor host at once: a machine that died."""
        self.ironic.kill_conductor(host, signal.SIGKILL)

    def log(self, host):
        index = self.hosts.index(host)
        with open(os.path.join(self.ironic.dir, f"conductor-{index}.log")) as f:
            return f.read()


class HeldRelay:
    """A TCP relay from address:port to target (address, port) that holds what clients send
    while hold_file exists. Conductor X's host name is its address: the API and X itself
    (a resume of the cleaning is an RPC to its own name) reach X's JSON-RPC server through
    it, which listens elsewhere ([json_rpc]host_ip); so the test can keep X between
    recording a job's end and the RPC that resumes the node."""

    def __init__(self, address, port, target, hold_file):
        self.target, self.hold_file = target, hold_file
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((address, port))
        self.sock.listen(64)
        self.open = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client = self.sock.accept()[0]
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                return
            server.settimeout(None)
            self.open += [client, server]
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False),
                             daemon=True).start()

    def _pump(self, source, sink, held):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                while held and os.path.exists(self.hold_file):
                    time.sleep(0.05)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def stop(self):
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        for conn in self.open:
            conn.close()


def deploy_info():
    with open(LAYOUT) as f:
        layout = json.load(f)
    return {"image_source": "http://127.0.0.1:9/image.qcow2", "provision_layout": layout}


def held_sshd(workdir, jobs):
    """The stand-in ramdisk: sshd that holds, while jobs.hold(node) is in place, the start of
    node's job once it has started it (held_exec.py: the conductor records the job when the
    start returns) and its exit_code read over SFTP (held_sftp.py)."""
    script = os.path.join(HERE, "held_sftp.py")
    sshd = realenv.Sshd(workdir, sftp=f"{sys.executable} {script} {jobs.dir}").start()
    wrapper = os.path.join(HERE, "held_exec.py")
    with open(sshd.client_key_file + ".pub") as f:
        key = f.read().strip()
    # sshd reads authorized_keys at each login: the forced command applies from now on
    with open(os.path.join(sshd.dir, "authorized_keys"), "w") as f:
        f.write(f'command="{sys.executable} {wrapper} {jobs.dir}" {key}\n')
    return sshd


def rpc_to_itself_is_local():
    """Whether a conductor's RPC to its own host name is a function call in its process,
    which no relay can hold. Ironic 29.x (2025.1) makes it one whenever the process runs a
    conductor (rpcapi.ConductorAPI._prepare_call: `rpc.GLOBAL_MANAGER is not None and host
    == CONF.host`); from 32 only when there is no RPC client (rpc_transport none), so with
    JSON-RPC it goes out over the network. Read from Ironic's source."""
    return ("rpc.GLOBAL_MANAGER is not None and host == CONF.host"
            in realenv.ironic_source("conductor/rpcapi.py"))


def missing():
    return realenv.missing_prerequisites() + realenv.MariaDB.missing() + [
        p for p in ("/usr/lib/openssh/sftp-server",) if not os.path.exists(p)] + (
        [] if shutil.which("flock") else ["flock"])
