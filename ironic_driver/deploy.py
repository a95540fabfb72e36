"""`provision` deploy interface: Ironic powers, boots and serves DHCP; provision does the disks.

Finding the ramdisk: `prepare` hands the boot interface the kernel parameters Ironic builds
for any ramdisk (ipa-api-url). The ramdisk's provision-ironic-agent looks its node up by MAC
(GET /v1/lookup), keeps the agent token, and heartbeats with its SSH address (callback_url)
and this boot's SSH host key (agent_verify_ca). Ironic checks the token before `heartbeat`
below runs and refuses a later heartbeat whose URL or key changed; `heartbeat` records both
and starts provision at once. driver_info/provision_ssh_address (with provision_host_key)
is a static override for networks where the ramdisk cannot reach the API.

Progress and the exit code do not ride on the heartbeat: the conductor reads them over the
same SSH connection it runs provision with (see docs/ironic.md section 5 for why).

Nothing blocks a conductor worker for the whole provision. The `deploy` step reboots the node
into the ramdisk and returns DEPLOYWAIT. A periodic task (every poll_interval) then, per node:
waits for SSH, uploads the input and starts provision detached (setsid), and later reads the
events and the exit code. On exit 0 it resumes the deploy steps (prepare_instance_boot,
reboot_to_instance); on any other exit code, or after deploy_timeout, the deploy fails with
the tail of provision's output in last_error. The periodic task itself only dispatches: each
node's look runs in the conductor's worker pool, at most [conductor]periodic_max_workers at
a time (fanout.py), so a ramdisk that is slow to answer does not hold up the others.

State kept in driver_internal_info (all keys start with provision_):
    provision_phase          wait_ramdisk | running | done
    provision_started_at     time.time() of the power on into the ramdisk
    provision_events         the latest provision events (JSON objects from --events_file)
    provision_events_count   how many events were seen in total
    provision_events_offset  bytes of the events file already read
    provision_exit_code      provision's exit code once it exited
    provision_last_ssh_error why the last SSH attempt failed (while waiting for the ramdisk)
    provision_layout_step    the layout the set_layout deploy step chose (layouts.py)
    provision_ssh_address, provision_ssh_port, provision_host_key
                             where the ramdisk's heartbeat said SSH is, and the key it reported
    provision_heartbeats     how many heartbeats this deploy's ramdisk sent
Ironic's own agent_url and agent_verify_ca (its file of the reported key) are set too, so that
Ironic's checks for a changed callback URL or key apply, and are wiped with the token when a
deploy starts.
"""

import logging
import time

from ironic.common import boot_devices
from ironic.common import exception
from ironic.common import states
from ironic.conductor import periodics
from ironic.conductor import task_manager
from ironic.conductor import utils as manager_utils
from ironic.conf import CONF
from ironic.drivers import base
from ironic.drivers.modules import deploy_utils

from ironic_driver import config, fanout, images, layouts, remote, ssh, validation

LOG = logging.getLogger(__name__)

config.register(CONF)
OPTS = lambda: CONF.provision_agent  # noqa: E731  (read at call time: tests override)

PREFIX = "provision_"
_TRANSIENT = (OSError, EOFError, ssh.paramiko.SSHException, TimeoutError)
FOLLOWERS = fanout.FanOut()


def _is_ours(node):
    return node.driver_internal_info.get(PREFIX + "phase") in ("wait_ramdisk", "running")


class ProvisionDeploy(base.DeployInterface):
    """Deploy with provision_agent's `provision` run over SSH in our ramdisk."""

    def get_properties(self):
        props = dict(validation.REQUIRED)
        props.update(validation.OPTIONAL)
        props.update(layouts.PROPERTIES)
        return props

    def validate(self, task):
        opts = OPTS()
        validation.check_options(opts)
        validation.check_driver_info(task.node.driver_info, opts)
        task.driver.boot.validate(task)
        validation.check_instance(task, opts.data_driver)

    # ---- the operations Ironic calls around the deploy steps

    def prepare(self, task):
        node = task.node
        if node.provision_state == states.DEPLOYING:
            layouts.forget(node)    # a layout the set_layout step chose for an earlier deploy
            if images.from_glance(node):
                images.resolve(task)
            task.driver.network.add_provisioning_network(task)
            task.driver.boot.prepare_ramdisk(task, ramdisk_options(task.node))
        elif node.provision_state == states.ACTIVE:
            # Conductor restart or takeover of an active node: boot what is on the disk.
            task.driver.boot.prepare_instance(task)

    def clean_up(self, task):
        task.driver.boot.clean_up_ramdisk(task)
        task.driver.boot.clean_up_instance(task)
        images.clean_up(task.node)
        _forget(task.node)
        task.node.save()

    def tear_down(self, task):
        manager_utils.node_power_action(task, states.POWER_OFF)
        task.driver.storage.detach_volumes(task)
        task.driver.network.unconfigure_tenant_networks(task)
        return states.DELETED

    def take_over(self, task):
        # A DEPLOYWAIT node needs nothing: this conductor's periodic task picks it up with
        # the phase stored in driver_internal_info.
        if task.node.provision_state == states.ACTIVE:
            task.driver.boot.prepare_instance(task)

    def heartbeat(self, task, callback_url, agent_version, agent_verify_ca=None,
                  agent_status=None, agent_status_message=None):
        """The ramdisk's agent says where its SSH is and which host key it has."""
        handle_heartbeat(task, callback_url, agent_version, agent_verify_ca)

    # ---- deploy steps

    @base.deploy_step(priority=100)
    def deploy(self, task):
        """Power on into the ramdisk; the periodic task takes it from there."""
        node = task.node
        _forget(node)
        node.del_driver_internal_info(PREFIX + "exit_code")
        manager_utils.node_power_action(task, states.REBOOT)
        node.set_driver_internal_info(PREFIX + "phase", "wait_ramdisk")
        node.set_driver_internal_info(PREFIX + "started_at", time.time())
        node.set_driver_internal_info(PREFIX + "events", [])
        node.set_driver_internal_info(PREFIX + "events_count", 0)
        node.set_driver_internal_info(PREFIX + "events_offset", 0)
        node.save()
        return states.DEPLOYWAIT

    @base.deploy_step(priority=0, argsinfo=layouts.STEP_ARGSINFO)
    def set_layout(self, task, layout):
        """Choose this deploy's layout; run by a deploy template (see layouts.py)."""
        choice = layouts.record_step(task.node, layout)
        task.node.save()
        LOG.info("Node %s: deploy step set_layout chose %s", task.node.uuid,
                 f"layout {choice.name!r}" if choice.name else "an inline layout")

    @base.deploy_step(priority=60)
    def prepare_instance_boot(self, task):
        task.driver.boot.prepare_instance(task)
        try:
            supported = task.driver.management.get_supported_boot_devices(task)
        except exception.UnsupportedDriverExtension:
            supported = []
        if boot_devices.DISK in supported:
            manager_utils.node_set_boot_device(task, boot_devices.DISK, persistent=True)
        else:
            LOG.info("Node %s cannot boot from disk by request (supported: %s); relying on "
                     "its boot order", task.node.uuid, supported)

    @base.deploy_step(priority=20)
    def reboot_to_instance(self, task):
        manager_utils.node_power_action(task, states.POWER_OFF)
        task.driver.network.remove_provisioning_network(task)
        task.driver.network.configure_tenant_networks(task)
        manager_utils.node_power_action(task, states.POWER_ON)

    # ---- the periodic task that follows deploying nodes

    @periodics.node_periodic(
        purpose="following provision in deploy ramdisks",
        spacing=lambda: CONF.provision_agent.poll_interval,
        filters={"provision_state": states.DEPLOYWAIT, "reserved": False,
                 "maintenance": False},
        predicate_extra_fields=["driver_internal_info"],
        predicate=lambda n: _is_ours(n))
    def _follow_provision(self, task, manager, context):
        # The sweep only dispatches: the SSH work runs in the conductor's worker pool,
        # at most [conductor]periodic_max_workers nodes at a time (see fanout.py).
        opts = OPTS()
        try:
            return FOLLOWERS.submit(
                task.node.uuid, manager._spawn_worker, _follow_in_worker, context,
                task.node.uuid, limit=max(1, CONF.conductor.periodic_max_workers),
                wait=opts.connect_timeout + opts.command_timeout)
        except (fanout.Busy, exception.NoFreeConductorWorker) as exc:
            LOG.warning("Following provision: %s; the rest of this sweep waits for the next "
                        "one", exc)
            raise periodics.Stop()


def ramdisk_options(node):
    """Kernel parameters for the ramdisk: Ironic's own (ipa-api-url), and, for a node whose
    host key is pinned statically, the word that keeps the build's key (else the ramdisk makes
    a fresh one per boot and reports it in the heartbeat)."""
    options = deploy_utils.build_agent_options(node)
    if node.driver_info.get("provision_host_key"):
        options["provision.hostkey"] = "baked"
    return options


def handle_heartbeat(task, callback_url, agent_version, agent_verify_ca):
    node = task.node
    if node.provision_state != states.DEPLOYWAIT or not _is_ours(node):
        LOG.debug("Heartbeat from node %s in %s ignored: no provision deploy waits for it",
                  node.uuid, node.provision_state)
        return
    try:
        address, port = _callback_address(callback_url)
        host_key = _reported_key(agent_verify_ca)
    except ValueError as exc:
        _fail(task, f"the ramdisk's heartbeat is unusable: {exc}")
        return
    info = node.driver_internal_info
    updates = {PREFIX + "ssh_address": address, PREFIX + "ssh_port": port,
               PREFIX + "host_key": host_key}
    first = info.get(PREFIX + "ssh_address") is None
    if not first and any(info.get(k) != v for k, v in updates.items()):
        # Ironic already refuses a changed URL or key at the API; this is the same rule for
        # a heartbeat that reached us another way (say, after a conductor takeover).
        _fail(task, f"the ramdisk's heartbeat changed its address or host key (now {address} "
                    f"port {port}); refusing it")
        return
    updates["agent_url"] = callback_url
    if agent_verify_ca:
        updates["agent_verify_ca"] = agent_verify_ca
    updates[PREFIX + "heartbeats"] = info.get(PREFIX + "heartbeats", 0) + 1
    updates["agent_last_heartbeat"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    if not _save(task, updates):
        return
    if first:
        LOG.info("Node %s: ramdisk (agent %s) heartbeats from %s port %s with host key %s",
                 node.uuid, agent_version, address, port,
                 ssh.fingerprint(host_key) if host_key else "(none reported)")
    if node.driver_internal_info.get(PREFIX + "phase") == "wait_ramdisk":
        # Start now rather than at the next poll; the heartbeat runs in a conductor worker.
        follow(task)


def _callback_address(url):
    import ipaddress
    import urllib.parse
    parsed = urllib.parse.urlsplit(url or "")
    try:
        address = str(ipaddress.ip_address(parsed.hostname or ""))
        port = parsed.port or 22
    except ValueError:
        raise ValueError(f"callback_url {url!r} does not name an IP address and port") from None
    return address, port


def _reported_key(path):
    """agent_verify_ca reaches us as the file Ironic stored the reported text in."""
    if not path:
        return None
    try:
        with open(path) as f:
            text = f.read(16384)
    except OSError as exc:
        raise ValueError(f"cannot read the reported host key ({exc})") from None
    key = ssh.parse_public_key(text)
    return f"{key.get_name()} {key.get_base64()}"


def _follow_in_worker(context, node_uuid):
    try:
        with task_manager.acquire(context, node_uuid, shared=True,
                                  purpose="following provision in a deploy ramdisk") as task:
            follow(task)
    except (exception.NodeNotFound, exception.NodeLocked) as exc:
        LOG.info("Following provision on node %s skipped: %s", node_uuid, exc)
    except Exception:
        # Nobody waits for this worker: what is not logged here is lost.
        LOG.exception("Following provision on node %s failed", node_uuid)


def follow(task):
    """One look at one node; transitions it when provision is done. Safe to call any time."""
    node = task.node
    if node.provision_state != states.DEPLOYWAIT or not _is_ours(node):
        return
    opts = OPTS()
    info = node.driver_internal_info
    phase = info[PREFIX + "phase"]
    LOG.debug("provision poll of node %s in phase %s", node.uuid, phase)
    elapsed = time.time() - info.get(PREFIX + "started_at", time.time())
    if elapsed > opts.deploy_timeout:
        _fail(task, f"provision did not finish within deploy_timeout ({opts.deploy_timeout} s, "
                    f"phase {phase}); last SSH error: {info.get(PREFIX + 'last_ssh_error')}")
        return
    updates = {}
    target = _ssh_target(node, opts)
    if target is None:
        _save(task, {PREFIX + "last_ssh_error": "no heartbeat from the ramdisk yet (it looks "
                     "its node up through ipa-api-url; no driver_info/provision_ssh_address)"})
        return
    try:
        client = _connect(node, target, opts)
    except _TRANSIENT + (ssh.HostKeyError,) as exc:
        # A key that differs from the pin is not a ramdisk still booting: stop at once.
        if isinstance(exc, (ssh.HostKeyError, ssh.paramiko.BadHostKeyException)):
            _fail(task, f"refusing the ramdisk of node {node.uuid}: {exc}")
            return
        _save(task, {PREFIX + "last_ssh_error": f"{type(exc).__name__}: {exc}"})
        return
    try:
        if phase == "wait_ramdisk":
            data_driver = opts.data_driver
            text = _json(validation.payload(node, data_driver))
            started = remote.start(client, _remote_dir(node, opts), text,
                                   opts.provision_command, data_driver,
                                   opts.provision_extra_args, opts.command_timeout)
            updates[PREFIX + "phase"] = phase = "running"
            updates[PREFIX + "last_ssh_error"] = None
            if started:
                LOG.info("provision started on node %s", node.uuid)
            else:
                LOG.warning("provision was already running on node %s (started by a poll "
                            "whose progress was not saved); following that one", node.uuid)
        st = remote.status(client, _remote_dir(node, opts), info.get(PREFIX + "events_offset", 0),
                           opts.command_timeout, opts.log_tail_lines)
    except _TRANSIENT as exc:
        updates[PREFIX + "last_ssh_error"] = f"{type(exc).__name__}: {exc}"
        _save(task, updates)
        return
    except (RuntimeError, exception.IronicException) as exc:
        _fail(task, str(exc))
        return
    finally:
        client.close()
    if st["events"]:
        kept = (info.get(PREFIX + "events") or []) + st["events"]
        updates[PREFIX + "events"] = kept[-opts.events_kept:]
        updates[PREFIX + "events_count"] = info.get(PREFIX + "events_count", 0) + len(
            st["events"])
    updates[PREFIX + "events_offset"] = st["events_offset"]
    if st["exit_code"] is None:
        _save(task, updates)
        return
    updates[PREFIX + "exit_code"] = st["exit_code"]
    if st["exit_code"] != 0:
        _save(task, updates)
        _fail(task, f"provision exited with {st['exit_code']}; last output:\n{st['tail']}")
        return
    updates[PREFIX + "phase"] = "done"
    if not _save(task, updates):
        return
    LOG.info("provision finished on node %s; resuming the deploy steps", node.uuid)
    manager_utils.notify_conductor_resume_deploy(task)


def _json(payload):
    import json
    return json.dumps(payload, indent=1, sort_keys=True)


def _remote_dir(node, opts):
    # Per node, so that one host can stand in for many ramdisks (tests, benchmark).
    return ssh.join(opts.remote_dir, node.uuid)


def _ssh_target(node, opts):
    """(address, port, pinned key or None): driver_info's static address wins over the one
    the heartbeat reported; None while neither is known."""
    info, dii = node.driver_info, node.driver_internal_info
    if info.get("provision_ssh_address"):
        return (info["provision_ssh_address"],
                int(info.get("provision_ssh_port", opts.ssh_port)),
                info.get("provision_host_key"))
    if dii.get(PREFIX + "ssh_address"):
        return (dii[PREFIX + "ssh_address"], int(dii[PREFIX + "ssh_port"]),
                info.get("provision_host_key") or dii.get(PREFIX + "host_key"))
    return None


def _connect(node, target, opts):
    address, port, host_key = target
    return ssh.connect(
        address, port, node.driver_info.get("provision_ssh_user", opts.ssh_user),
        ssh.load_private_key(opts.ssh_private_key_file),
        host_key=host_key, known_hosts_file=opts.ssh_known_hosts_file,
        accept_unknown=opts.accept_unknown_host_keys, timeout=opts.connect_timeout)


def _save(task, updates):
    """Write under an exclusive lock; False when the node moved on meanwhile."""
    info = task.node.driver_internal_info
    if (task.node.provision_state == states.DEPLOYWAIT and _is_ours(task.node)
            and all(info.get(k) == v for k, v in updates.items())):
        # Most polls of a running provision change nothing: no lock, no database write.
        return True
    if task.shared:
        task.upgrade_lock(purpose="recording provision progress")
    node = task.node
    if node.provision_state != states.DEPLOYWAIT or not _is_ours(node):
        return False
    for key, value in updates.items():
        node.set_driver_internal_info(key, value)
    node.save()
    return True


def _fail(task, message):
    if task.shared:
        task.upgrade_lock(purpose="failing a provision deploy")
    if task.node.provision_state != states.DEPLOYWAIT:
        return
    task.node.set_driver_internal_info(PREFIX + "phase", "failed")
    manager_utils.deploying_error_handler(task, f"Deploy of node {task.node.uuid} failed: "
                                                f"{message}", message)


def _forget(node):
    for key in list(node.driver_internal_info):
        if key.startswith(PREFIX) and key not in (PREFIX + "events", PREFIX + "exit_code",
                                                  PREFIX + "events_count", layouts.STEP_KEY):
            node.del_driver_internal_info(key)

