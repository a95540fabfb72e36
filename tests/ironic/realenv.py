"""A real Ironic (all-in-one, sqlite, noauth, no RPC) and a local sshd standing in for the
deploy ramdisk. Shared by the integration test and benchmarks/ironic_scale.py."""

import contextlib
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import requests

from tests import REPO_ROOT as REPO
from tests.vmbench import procs

API_HEADERS = {"X-OpenStack-Ironic-API-Version": "latest"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


JSON_RPC_PORT = 8089     # Ironic's default [json_rpc]port


def free_loopback_address(port):
    """An address in 127.0.0.0/8 other than 127.0.0.1 where port is free."""
    for _ in range(50):
        address = f"127.{random.randrange(1, 255)}.{random.randrange(0, 256)}.1"
        with socket.socket() as s:
            try:
                s.bind((address, port))
            except OSError:
                continue
        return address
    raise RuntimeError(f"no loopback address with port {port} free")


def bin_path(name):
    """A console script of the venv running us (ironic, provision), else PATH."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    return here if os.path.exists(here) else shutil.which(name)


def ironic_source(*names):
    """The text of the first of Ironic's modules at these paths (relative to the ironic
    package) that exists, read as a file: importing a package such as ironic.command would
    run its __init__, which picks oslo.service's backend; "" when none is there."""
    import importlib.util
    spec = importlib.util.find_spec("ironic")
    base = os.path.dirname(spec.origin) if spec and spec.origin else ""
    for name in names:
        with contextlib.suppress(OSError), open(os.path.join(base, name), encoding="utf-8") as f:
            return f.read(200_000)
    return ""


def all_in_one_starts():
    """Whether the installed Ironic's all-in-one `ironic` command can start. Ironic 32.x
    (2025.2; 32.0.0 to 32.1.0, its newest) constructs oslo.service's ServiceLauncher with
    no_fork=, which no oslo.service release takes (4.2.1, its minimum, to 4.8.0, read): the
    command dies with TypeError before it serves. 35 launches through its own
    ironic.common.service.process_launcher; 29 (ironic/cmd/, not ironic/command/) passes no
    no_fork."""
    source = ironic_source("command/singleprocess.py", "cmd/singleprocess.py")
    return re.search(r"ServiceLauncher\([^)]{0,200}no_fork", source) is None


def missing_prerequisites():
    missing = [n for n in ("ironic", "ironic-dbsync", "provision") if not bin_path(n)]
    missing += [p for p in ("/usr/sbin/sshd", "/usr/bin/ssh-keygen") if not os.path.exists(p)]
    return missing


def dry_run_options(ramdisk, workdir, inventory, provision=None):
    """[provision_agent] options for a stand-in ramdisk (the local sshd) that runs the real
    `provision --dry_run` against a recorded inventory; its job files stay under
    workdir/remote. A forced stand-in (Sshd.forced) gets its dispatcher pointed at this
    Ironic's directories, and the conductor speaks registered commands to it."""
    if getattr(ramdisk, "forced", False):
        ramdisk.force(os.path.join(workdir, "remote"), os.path.join(workdir, "ironic", "binding"),
                      [f"--inventory_file={inventory}"], provision=provision)
        return {"ssh_private_key_file": ramdisk.client_key_file, "poll_interval": 1,
                "deploy_timeout": 120, "connect_timeout": 5, "command_timeout": 20,
                "ramdisk_commands": True, "provision_extra_args": "--dry_run",
                "remote_dir": os.path.join(workdir, "remote")}
    return {"ssh_private_key_file": ramdisk.client_key_file, "poll_interval": 1,
            "deploy_timeout": 120, "connect_timeout": 5, "command_timeout": 20,
            "provision_command": bin_path("provision"),
            "provision_extra_args": f"--dry_run,--inventory_file,{inventory}",
            "remote_dir": os.path.join(workdir, "remote")}


@contextlib.contextmanager
def with_script_provision(ramdisk, workdir, script):
    """A started Ironic whose stand-in ramdisk runs `script` (a shell or Python text with its
    #! line) as provision: for tests of what the conductor does with provision's exit code,
    events and output."""
    fake = os.path.join(workdir, "script-provision")
    with open(fake, "w") as f:
        f.write(script)
    os.chmod(fake, 0o755)
    server = Ironic(workdir, {
        "ssh_private_key_file": ramdisk.client_key_file,
        "poll_interval": 1, "deploy_timeout": 120, "connect_timeout": 5,
        "command_timeout": 20, "data_driver": "native", "provision_command": fake,
        "remote_dir": os.path.join(workdir, "remote"),
    })
    server.start()
    try:
        yield server
    finally:
        server.stop()


def wait_for(predicate, timeout, interval=0.2, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class Sshd:
    """sshd on 127.0.0.1 with its own host key, key-only login for the current user.
    sftp: the SFTP subsystem's command line (default: sshd's own internal-sftp)."""

    def __init__(self, workdir, sftp="internal-sftp", forced=False):
        self.sftp = sftp
        # forced: the client key runs provision-dispatch only (force()), as ramdisk/init
        # installs the conductor's key in a ramdisk built with --conductor-key.
        self.forced = forced
        self.dispatch_log = os.path.join(workdir, "provision-dispatch.log")
        self.dir = os.path.join(workdir, "sshd")
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        self.port = free_port()
        self.host_key_file = os.path.join(self.dir, "host_ed25519")
        self.client_key_file = os.path.join(workdir, "conductor_ed25519")
        self.proc = None

    def start(self):
        for path in (self.host_key_file, self.client_key_file):
            subprocess.run(["/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path],
                           check=True)
        shutil.copy(self.client_key_file + ".pub", os.path.join(self.dir, "authorized_keys"))
        os.makedirs("/run/sshd", exist_ok=True)   # privilege separation directory
        cfg = os.path.join(self.dir, "sshd_config")
        with open(cfg, "w") as f:
            f.write(f"""Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.host_key_file}
AuthorizedKeysFile {self.dir}/authorized_keys
PidFile {self.dir}/sshd.pid
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
MaxStartups 200:30:400
MaxSessions 100
Subsystem sftp {self.sftp}
# Commands run through root's bash, which sources ~/.bashrc when started by sshd; on the
# developers' machines that file runs `pyenv init` (115 ms of CPU per command against 19 ms
# without). A ramdisk's root has no such file; in a 200-node run the stand-in's CPU fell
# from 57 s to 17 s without it, CPU the conductor shares on the benchmark's machine.
SetEnv HOME={self.dir}
""")
        self.log = open(os.path.join(self.dir, "sshd.log"), "w")
        self.proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", cfg],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: _port_open(self.port), 10, what="sshd")
        return self

    def force(self, job_root, binding_dir, provision_args=(), path=None, provision=None,
              key_file=None, update_root=None, pythonpath=()):
        """The client key (key_file's: another stand-in's) forced into provision-dispatch with
        these directories (sshd reads authorized_keys at each login: no restart).
        update_root: the dispatcher takes updates there (its --update_keys is
        update_root/allowed_signers) and starts as the ramdisk's console script does, the
        update's `current` first on its path; pythonpath: directories before this tree's."""
        self.forced_as = dict(job_root=job_root, binding_dir=binding_dir,
                              provision_args=provision_args, path=path, provision=provision)
        argv = [sys.executable, "-m", "provision_agent.agent.dispatch"]
        if update_root:
            argv = [sys.executable, "-c", "import os, sys; sys.path.insert(0, os.path.realpath("
                    "sys.argv.pop(1))); from provision_agent.agent.dispatch import main; "
                    "sys.exit(main())", os.path.join(update_root, "current"),
                    "--update_root", update_root,
                    "--update_keys", os.path.join(update_root, "allowed_signers")]
        argv += ["--job_root", job_root,
                 "--binding_dir", binding_dir, "--provision", provision or bin_path("provision"),
                 "--log_file", self.dispatch_log]
        argv += [f"--provision_arg={a}" for a in provision_args]
        env = (f"PYTHONPATH={shlex.quote(':'.join([*pythonpath, REPO]))}"
               + (f" PATH={shlex.quote(path)}" if path else ""))
        command = f"env {env} " + " ".join(map(shlex.quote, argv))
        with open((key_file or self.client_key_file) + ".pub") as f:
            key = f.read().strip()
        line = 'restrict,command="%s" %s\n' % (command.replace('"', '\\"'), key)
        with open(os.path.join(self.dir, "authorized_keys"), "w") as f:
            f.write(line)

    @property
    def host_key(self):
        with open(self.host_key_file + ".pub") as f:
            return " ".join(f.read().split()[:2])

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def _port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


class Silent:
    """A TCP port that accepts connections and never says a word: to one SSH attempt,
    a ramdisk still booting (the attempt waits connect_timeout for the banner)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.port = self.sock.getsockname()[1]
        self.held = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return

    def stop(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)   # wakes the accept()
        except OSError:
            pass
        self.sock.close()
        for conn in self.held:
            conn.close()


class MariaDB:
    """A throwaway MariaDB server on a Unix socket in workdir, for an Ironic on the database
    its operators run (benchmarks/ironic_scale.py --database mariadb). Needs Debian's
    mariadb-server (`scripts/host-packages.sh`) and PyMySQL in Ironic's venv."""

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "mariadb")
        self.socket = os.path.join(self.dir, "sock")
        self.proc = None

    @staticmethod
    def missing():
        return [p for p in ("/usr/bin/mariadb-install-db", "/usr/sbin/mariadbd", "/usr/bin/mariadb")
                if not os.path.exists(p)]

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        data = os.path.join(self.dir, "data")
        subprocess.run(["/usr/bin/mariadb-install-db", f"--datadir={data}", "--user=root",
                        "--auth-root-authentication-method=normal"],
                       check=True, capture_output=True)
        self.log = open(os.path.join(self.dir, "server.log"), "w")
        # Ironic's own advice for MySQL: READ-COMMITTED; a bigger log buffer for 500 writers
        self.proc = subprocess.Popen(
            ["/usr/sbin/mariadbd", f"--datadir={data}", f"--socket={self.socket}",
             "--skip-networking", "--user=root", f"--pid-file={self.dir}/pid",
             "--transaction-isolation=READ-COMMITTED", "--max-connections=500"],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: self._sql("SELECT 1").returncode == 0, 60, what="MariaDB")
        res = self._sql("CREATE DATABASE ironic CHARACTER SET utf8mb3")
        if res.returncode:
            raise RuntimeError(f"MariaDB: {res.stderr.strip()}")
        return self

    def _sql(self, statement):
        return subprocess.run(["/usr/bin/mariadb", f"--socket={self.socket}", "-uroot",
                               "-e", statement], capture_output=True, text=True)

    @property
    def url(self):
        return f"mysql+pymysql://root@localhost/ironic?unix_socket={self.socket}&charset=utf8"

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def write_ahead_log(path):
    """Switch the sqlite database to WAL, which stays set in the file. Ironic 39 means to do
    this on every connection, but it listens on SQLAlchemy's ConnectionEvents class, and with
    SQLAlchemy 2.1.9 (what pip installs beside it) such a listener never fires for an engine:
    the database stayed in rollback-journal mode, where a reader blocks writers too (polls
    that only read, of 200 deploying nodes, halved the rate Ironic took deploy requests at).
    The tests and the benchmark measure the database Ironic meant to have."""
    import sqlite3
    with contextlib.closing(sqlite3.connect(path)) as db:
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode != "wal":
        raise RuntimeError(f"{path}: sqlite refused WAL (journal mode {mode})")


def _api_bind(api_host):
    """Where the API listens: loopback alone, or every address ("::" is both families on
    one socket: cheroot turns IPV6_V6ONLY off for it, so self.url's 127.0.0.1 still works)."""
    if api_host == "127.0.0.1":
        return api_host
    return "::" if ":" in api_host else "0.0.0.0"


class Ironic:
    def __init__(self, workdir, provision_opts, extra_conf="", api_host="127.0.0.1",
                 database=None, split_api=False, conductors=1, conductor_extra=()):
        """api_host: where the API listens, and the address in the ipa-api-url the conductor
        gives ramdisks ([service_catalog]endpoint_override); database: a SQLAlchemy URL
        instead of the sqlite file (e.g. MariaDB.url); split_api: ironic-api and
        ironic-conductor as two processes talking JSON-RPC, as a production conductor runs
        beside its API, instead of the all-in-one `ironic`; conductors: how many
        ironic-conductor processes (split_api only), each with its own host name (and
        JSON-RPC address), log file, lock and certificate directories (conductor-N.conf,
        read after ironic.conf), as conductors on separate machines have; conductor_extra[N]:
        more of conductor N's own settings."""
        if conductors > 1 and not split_api:
            raise ValueError("several conductors talk to the API over JSON-RPC: split_api")
        # On an Ironic whose `ironic` cannot start (all_in_one_starts), ironic-api and
        # ironic-conductor, as its operators run it
        split_api = split_api or not all_in_one_starts()
        self.split_api = split_api
        self.api_proc = None
        # host name -> its ironic-conductor process (Popen), in start order
        self.conductor_procs = {}
        self.dir = os.path.join(workdir, "ironic")
        os.makedirs(self.dir, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # an IPv6 api_host (the lab's IPv6-only network) goes in brackets
        self.ramdisk_api_url = (f"http://[{api_host}]:{self.port}" if ":" in api_host
                                else f"http://{api_host}:{self.port}")
        self.conf = os.path.join(self.dir, "ironic.conf")
        self.log_file = os.path.join(self.dir, "ironic.log")
        # Where the stand-in ramdisk's agents write their node bindings (one directory for
        # every node the local sshd stands in for; a real ramdisk holds one).
        self.binding_dir = os.path.join(self.dir, "binding")
        self.database = database or f"sqlite:///{self.dir}/ironic.sqlite"
        popts = "\n".join(f"{k} = {v}" for k, v in provision_opts.items())
        with open(self.conf, "w") as f:
            f.write(f"""[DEFAULT]
auth_strategy = noauth
rpc_transport = {"json-rpc" if split_api else "none"}
# with JSON-RPC (split_api) the API reaches the conductor by this name: an address needs no
# resolver
host = {"127.0.0.1" if split_api else "test-conductor"}
debug = true
log_file = {self.log_file}
enabled_hardware_types = fake-hardware
enabled_boot_interfaces = fake
enabled_power_interfaces = fake
enabled_management_interfaces = fake
enabled_deploy_interfaces = provision,fake
default_deploy_interface = provision
# agent: in-band inspection, which stores the inventory the ramdisk posts (post_inventory)
enabled_inspect_interfaces = no-inspect,agent
default_inspect_interface = no-inspect
enabled_console_interfaces = no-console
enabled_raid_interfaces = no-raid,provision
enabled_rescue_interfaces = no-rescue
enabled_vendor_interfaces = no-vendor
enabled_bios_interfaces = no-bios
enabled_firmware_interfaces = no-firmware
enabled_network_interfaces = noop
enabled_storage_interfaces = noop
[api]
host_ip = {_api_bind(api_host)}
port = {self.port}
[service_catalog]
# No Keystone: the ramdisk's ipa-api-url comes from here.
endpoint_override = {self.ramdisk_api_url}
[database]
connection = {self.database}
[dhcp]
dhcp_provider = none
[conductor]
automated_clean = false
[inspector]
# The fake boot interface cannot boot an inspection ramdisk; the test posts for it.
require_managed_boot = false
[oslo_concurrency]
lock_path = {self.dir}/locks
{f"[json_rpc]{chr(10)}auth_strategy = noauth{chr(10)}" if split_api else ""}{
 f"host_ip = 127.0.0.1{chr(10)}port = {free_port()}{chr(10)}"
 if split_api and conductors == 1 else ""}[provision_agent]
binding_dir = {self.binding_dir}
{popts}
# The test's own settings come last: for an option set twice, oslo.config takes the last.
{extra_conf}
""")
        self.proc = None
        # [(host name, its conductor-N.conf)]; one conductor reads ironic.conf alone
        extra = list(conductor_extra) + [""] * conductors
        self.conductor_confs = [self._conductor_conf(i, extra[i]) for i in range(conductors)] \
            if conductors > 1 else []

    def _conductor_conf(self, index, extra):
        """What differs between conductors: each is a host of its own, here an address of
        its own on the loopback network, where its JSON-RPC server listens on Ironic's
        default port, 8089, as on a machine of its own. (Another port would do for the RPC,
        but Ironic 39 then registers the conductor as host:port while it still reserves
        nodes as host, so the survivors' orphan check never frees a dead conductor's
        locks.)"""
        host = free_loopback_address(JSON_RPC_PORT)
        path = os.path.join(self.dir, f"conductor-{index}.conf")
        with open(path, "w") as f:
            f.write(f"""[DEFAULT]
host = {host}
log_file = {self.dir}/conductor-{index}.log
[json_rpc]
host_ip = {host}
port = {JSON_RPC_PORT}
[oslo_concurrency]
lock_path = {self.dir}/locks-{index}
[agent]
certificates_path = {self.dir}/certificates-{index}
{extra}
""")
        return host, path

    def launch(self, env=None):
        """Starts the process without waiting for it to serve."""
        subprocess.run([bin_path("ironic-dbsync"), "--config-file", self.conf, "create_schema"],
                       check=True, capture_output=True)
        if self.database.startswith("sqlite:"):
            write_ahead_log(os.path.join(self.dir, "ironic.sqlite"))
        self.out = open(os.path.join(self.dir, "ironic.out"), "w")
        if self.split_api:
            if self.conductor_confs:
                for host, conf in self.conductor_confs:
                    self.launch_conductor(host, conf, env)
                self.proc = next(iter(self.conductor_procs.values()))
            else:
                self.proc = subprocess.Popen([bin_path("ironic-conductor"), "--config-file",
                                              self.conf], stdout=self.out,
                                             stderr=subprocess.STDOUT, env=env)
            self.api_proc = subprocess.Popen([bin_path("ironic-api"), "--config-file",
                                              self.conf], stdout=self.out,
                                             stderr=subprocess.STDOUT, env=env)
            return
        self.proc = subprocess.Popen([bin_path("ironic"), "--config-file", self.conf],
                                     stdout=self.out, stderr=subprocess.STDOUT, env=env)

    def launch_conductor(self, host, conf, env=None):
        """One more ironic-conductor, in a process group of its own (kill_conductor)."""
        self.conductor_procs[host] = subprocess.Popen(
            [bin_path("ironic-conductor"), "--config-file", self.conf, "--config-file", conf],
            stdout=self.out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def kill_conductor(self, host, sig=signal.SIGKILL):
        """sig to every process of one conductor at once (oslo.service runs the conductor in
        a child of the process started; a child left alone would notice its parent's death
        and shut down cleanly, which a crashed machine does not)."""
        proc = self.conductor_procs[host]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        if sig == signal.SIGKILL:
            proc.wait(10)

    def start(self, timeout=60, env=None):
        """env: the processes' environment (default: ours), e.g. with a REQUESTS_CA_BUNDLE."""
        self.launch(env)
        wait_for(self._up, timeout, what="the Ironic API")
        # The API answers before the conductor has registered its drivers.
        wait_for(lambda: self.get("/v1/drivers").get("drivers"), timeout,
                 what="a registered conductor")
        if self.conductor_confs:
            hosts = {host for host, _ in self.conductor_confs}
            wait_for(lambda: hosts <= self.alive_conductors(), timeout,
                     what=f"conductors {sorted(hosts)}")
        return self

    def alive_conductors(self):
        return {c["hostname"] for c in self.get("/v1/conductors").get("conductors", [])
                if c.get("alive")}

    def _up(self):
        for proc in filter(None, (self.proc, self.api_proc, *self.conductor_procs.values())):
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}; "
                                   f"see {self.dir}")
        try:
            return requests.get(self.url, timeout=1).ok
        except requests.RequestException:
            return False

    def request(self, method, path, body=None, ok=True, timeout=30):
        resp = requests.request(method, self.url + path, json=body, headers=API_HEADERS,
                                timeout=timeout)
        if ok and resp.status_code >= 400:
            raise RuntimeError(f"{method} {path}: {resp.status_code} {resp.text}")
        return resp

    def get(self, path):
        return self.request("GET", path).json()

    def node(self, uuid):
        return self.get(f"/v1/nodes/{uuid}")

    def set_state(self, uuid, target, ok=True, timeout=30):
        return self.request("PUT", f"/v1/nodes/{uuid}/states/provision", {"target": target},
                            ok=ok, timeout=timeout)

    def wait_state(self, uuid, states, timeout):
        states = set(states)
        return wait_for(lambda: (lambda n: n if n["provision_state"] in states else None)(
            self.node(uuid)), timeout, interval=0.5, what=f"node {uuid} in {sorted(states)}")

    def enroll(self, name, driver_info, instance_info, macs=(), driver="fake-hardware",
               interfaces=None, properties=None, provide_timeout=30, boot_mode="bios",
               first_cleaning=True):
        """boot_mode: the node's capability (the samples the tests deploy are BIOS layouts,
        and Ironic 39 boots an instance in UEFI when nothing says otherwise); None: unset.
        first_cleaning=False: provide skips automated cleaning (the node's automated_clean,
        Ironic's skip_automated_cleaning), which is then turned on for the undeploy."""
        properties = dict(properties or {})
        if boot_mode and "capabilities" not in properties:
            properties["capabilities"] = f"boot_mode:{boot_mode}"
        node = self.request("POST", "/v1/nodes", {
            "name": name, "driver": driver, "deploy_interface": "provision",
            "driver_info": driver_info, "properties": properties,
            **({} if first_cleaning else {"automated_clean": False}),
            **{f"{k}_interface": v for k, v in (interfaces or {}).items()}}).json()
        for mac in macs:    # what a ramdisk's lookup finds the node by
            self.request("POST", "/v1/ports", {"node_uuid": node["uuid"], "address": mac})
        patch = [{"op": "add", "path": f"/instance_info/{k}", "value": v}
                 for k, v in instance_info.items()]
        self.request("PATCH", f"/v1/nodes/{node['uuid']}", patch)
        self.set_state(node["uuid"], "manage")
        self.wait_state(node["uuid"], ["manageable"], 30)
        self.set_state(node["uuid"], "provide")
        done = self.wait_state(node["uuid"], ["available", "clean failed"], provide_timeout)
        if done["provision_state"] != "available":
            raise RuntimeError(f"node {name}: {done['provision_state']}: {done['last_error']}")
        if not first_cleaning:
            self.request("PATCH", f"/v1/nodes/{node['uuid']}",
                         [{"op": "replace", "path": "/automated_clean", "value": True}])
        return node["uuid"]

    def post_inventory(self, mac, disks_inventory):
        """What an inspection ramdisk does: POST the machine's inventory, found by its MAC.
        Ironic's hooks also want the NIC, CPU and memory; the disks are what we read back."""
        inventory = dict(disks_inventory.get("inventory", disks_inventory))
        inventory.update({
            "interfaces": [{"name": "eth0", "mac_address": mac, "ipv4_address": "192.0.2.5"}],
            "cpu": {"architecture": "x86_64", "count": 2}, "memory": {"physical_mb": 2048}})
        # "inspect wait" shows before the conductor lets go of the node: Ironic answers 409
        # "locked ... please retry" meanwhile, and a real ramdisk retries (seen on the loaded
        # 2-core host, where the release took seconds)
        deadline = time.monotonic() + 120
        while True:
            resp = self.request("POST", "/v1/continue_inspection", {"inventory": inventory},
                                ok=False)
            if not (resp.status_code == 409 and "locked" in resp.text
                    and time.monotonic() < deadline):
                break
            time.sleep(1)
        if resp.status_code >= 400:
            raise RuntimeError(f"POST /v1/continue_inspection: {resp.status_code} {resp.text}")
        return resp

    def log_text(self):
        with open(self.log_file) as f:
            return f.read()

    def stop(self):
        if self.api_proc:
            procs.stop(self.api_proc)
        for proc in self.conductor_procs.values() or [self.proc]:
            procs.stop(proc)

