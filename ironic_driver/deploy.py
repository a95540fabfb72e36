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
events and the exit code (follow.py). On exit 0 it resumes the deploy steps
(prepare_instance_boot, reboot_to_instance); on any other exit code, or after no progress for
Ironic's callback timeout (timeouts.py), the deploy fails with the tail of provision's output
in last_error. The periodic task itself
only dispatches: each node's look runs in the conductor's worker pool, at most
[conductor]periodic_max_workers at a time (fanout.py), so a ramdisk that is slow to answer does
not hold up the others.

Cleaning works the same way: `prepare_cleaning` powers the node into the ramdisk, the clean
step erase_devices_metadata (priority 99, as ironic-python-agent's step of that name; change
it with [conductor]clean_step_priority_override) returns CLEANWAIT, and the same periodic task
runs `provision erase` there and resumes the cleaning when it exited 0.
"""

import logging
import time

from ironic.common import boot_devices, dhcp_factory, exception, states
from ironic.conductor import periodics
from ironic.conductor import utils as manager_utils
from ironic.conf import CONF
from ironic.drivers import base

from ironic_driver import config, ironic_compat, validation
from ironic_driver.conversation import fanout, fast_track, follow, heartbeat, job, pace
from ironic_driver.conversation.job import ramdisk_options  # noqa: F401  (part of this module's API)
from ironic_driver.conversation.vendor_steps import VendorSteps, list_first
from ironic_driver.document import images, layouts, oci, rebuild, sent
from ironic_driver.document.fragments import FragmentSteps

LOG = logging.getLogger(__name__)

# An Ironic older than the interface supports is refused here, while the conductor loads it.
ironic_compat.require_supported()
config.register(CONF)
OPTS = job.opts
FOLLOWERS = fanout.FOLLOWERS
# The name this interface is enabled by (setup.cfg's ironic.hardware.interfaces.deploy).
INTERFACE = "provision"
BOOT_SKIPPED = job.BOOT_SKIPPED


def sweep_order(nodes, followers, interval, running_interval):
    """[(uuid, starting, slow)] of nodes ((uuid, driver_internal_info) pairs) due for a poll:
    every node at most once per interval, the ones whose job is still to start first, then the
    ones whose ramdisk said their job exited, then the others least recently looked at first,
    and after all of them the slow ones (pace.py), each only once its back-off passed,
    hurried or not. A running job in a ramdisk that heartbeats is due only every
    running_interval, or once that ramdisk's heartbeat said the job exited
    (followers.hurried, heartbeat.py); so is a node whose ramdisk has yet to send the
    heartbeat that starts its job.

    Under load the conductor's CPU is what polls compete for: a job started a sweep earlier
    is a whole job earlier everywhere, a running one looked at a sweep later only finishes
    that much later, and most looks at a running job find it still running. Spacing those
    looks by the clock rather than by the slots free keeps a node's looks the same however
    many conductors share the nodes: spare capacity is not spent looking again."""
    followers.keep_only([uuid for uuid, _ in nodes])
    due = []
    for uuid, info in nodes:
        idle = followers.since_last(uuid)
        slow = pace.slow(info)
        if idle < pace.wait(info, interval, running_interval):
            continue
        phase = info.get(job.PREFIX + "phase")
        hurried = followers.hurried(uuid)
        # What a heartbeat brings forward: the end of a job in a ramdisk that heartbeats, and
        # the start of one whose ramdisk has yet to (the look only keeps the time).
        paced = (phase == "running" and info.get(job.PREFIX + "heartbeats")
                 or phase == "wait_ramdisk" and info.get(job.PREFIX + "awaiting_heartbeat"))
        if paced and not hurried and idle < running_interval:
            continue
        due.append((slow, phase != "wait_ramdisk", not hurried, -idle, uuid))
    return [(uuid, not running, slow) for slow, running, _later, _, uuid in sorted(due)]


class ProvisionDeploy(VendorSteps, FragmentSteps, base.DeployInterface):
    """Deploy with provision_agent's `provision` run over SSH in our ramdisk; the ramdisk's
    vendor steps beside ours (VendorSteps); templates' plug-in sections (FragmentSteps)."""

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
            elif oci.from_oci(node):
                oci.resolve(task)
            task.driver.network.add_provisioning_network(task)
            reuse, why = fast_track.reusable(task)
            if reuse:
                # As Ironic's agent interfaces: the running ramdisk is not booted again.
                LOG.info("Node %s: fast track: %s; its boot is left as it is", node.uuid, why)
                node.set_driver_internal_info(BOOT_SKIPPED, True)
            else:
                node.del_driver_internal_info(BOOT_SKIPPED)
                task.driver.boot.prepare_ramdisk(task, ramdisk_options(task.node))
        elif node.provision_state == states.ACTIVE:
            # Conductor restart or takeover of an active node: boot what is on the disk.
            task.driver.boot.prepare_instance(task)

    def clean_up(self, task):
        task.driver.boot.clean_up_ramdisk(task)
        task.driver.boot.clean_up_instance(task)
        # As Ironic's own deploy interfaces do: the DHCP provider stops answering for the
        # node's MACs (dnsmasq: `MAC,ignore`) until the next boot interface prepares them.
        dhcp_factory.DHCPFactory().clean_dhcp(task)
        images.clean_up(task.node)
        job.forget(task.node)
        # Undeploy and a failed deploy both come here: the step's record has done its work.
        layouts.forget(task.node)
        task.node.save()

    def tear_down(self, task):
        # the instance is gone: what a layout keeps on rebuild is not kept for the next one
        rebuild.forget(task.node)
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
        heartbeat.handle(task, sent.for_ramdisk, callback_url, agent_version, agent_verify_ca,
                         agent_status)

    # ---- cleaning

    def prepare_cleaning(self, task):
        """Power the node into the ramdisk; the clean step waits for its heartbeat. With
        fast track, a ramdisk that runs already is kept and the clean step starts its job
        there at once (fast_track.py)."""
        node = task.node
        task.driver.network.add_cleaning_network(task)
        # As Ironic's prepare_inband_cleaning: the boot is prepared in either case (a boot
        # interface keeps a fast-tracked ramdisk's medium itself).
        task.driver.boot.prepare_ramdisk(task, ramdisk_options(node))
        reuse, why = fast_track.reusable(task)
        if reuse:
            LOG.info("Node %s: fast track: %s; cleaning without a power cycle", node.uuid, why)
        else:
            manager_utils.node_power_action(task, states.REBOOT)
        job.begin(node, keep_ramdisk=reuse)
        node.save()
        # with [provision_agent]ramdisk_steps: CLEANWAIT, the ramdisk's steps listed first
        return list_first(task, reuse, fast_track.start_or_power_cycle, sent.for_ramdisk)

    def tear_down_cleaning(self, task):
        # As Ironic's tear_down_inband_cleaning: with fast track the ramdisk keeps running
        # (and heartbeating) for the next cleaning or deploy.
        reuse, why = fast_track.reusable(task)
        if reuse:
            LOG.info("Node %s: fast track: %s; left powered on", task.node.uuid, why)
        else:
            manager_utils.node_power_action(task, states.POWER_OFF)
        task.driver.boot.clean_up_ramdisk(task)
        task.driver.network.remove_cleaning_network(task)
        job.forget(task.node, keep_ramdisk=reuse)
        task.node.save()

    @base.clean_step(priority=99)
    def erase_devices_metadata(self, task):
        """Clear partition tables, md superblocks, LVM labels and filesystem signatures on
        the node's disks (`provision erase` in the ramdisk; node property skip_block_devices
        names disks to leave alone)."""
        return self._erase(task)

    @base.clean_step(priority=0)
    def erase_devices(self, task):
        """Erase every byte of the node's disks by the strongest method each offers: NVMe
        secure erase, ATA security erase, a discard that reads back as zeros, else an
        overwrite ([deploy]shred_random_overwrite_iterations random passes, then zeros).
        Off by default (priority 0): the metadata erase stays the automated one."""
        return self._erase(task)

    @base.clean_step(priority=0)
    def erase_devices_express(self, task):
        """erase_devices without the overwrite: a disk that offers no hardware or discard
        erase keeps the metadata erase alone. Off by default (priority 0)."""
        return self._erase(task)

    def _erase(self, task):
        # which erase runs is the node's clean_step (follow._job reads it)
        node = task.node
        if not job.is_ours(node):
            # The ramdisk booted for an earlier step: the one an earlier job of ours ran in
            # takes this one too, another is waited for afresh (job.begin_next).
            job.begin_next(node)
            node.save()
        elif job.reused(node):
            # fast track kept the ramdisk (prepare_cleaning): its job starts now, or the
            # node is powered into a fresh one
            fast_track.start_or_power_cycle(task, sent.for_ramdisk)
        return states.CLEANWAIT

    # ---- deploy steps

    @base.deploy_step(priority=100)
    def deploy(self, task):
        """Power on into the ramdisk; the periodic task takes it from there. With fast
        track, the job starts at once in the ramdisk that runs already (fast_track.py)."""
        node = task.node
        if node.driver_internal_info.get(BOOT_SKIPPED):
            job.begin(node, keep_ramdisk=True)     # forgets BOOT_SKIPPED
            fast_track.start_or_power_cycle(task, sent.for_ramdisk, prepare_boot=True)
            return states.DEPLOYWAIT
        manager_utils.node_power_action(task, states.REBOOT)
        job.begin(node)
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
        # provision exited 0 (the deploy step before this one): the disks hold this instance
        rebuild.mark(task.node)
        task.node.save()
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

    # ---- the periodic task that follows nodes waiting for their ramdisk

    @periodics.periodic(spacing=ironic_compat.periodic_spacing(
        lambda: CONF.provision_agent.poll_interval))
    def _follow_provision(self, manager, context):
        # The sweep only dispatches: the SSH work runs in the conductor's worker pool,
        # at most [conductor]periodic_max_workers nodes at a time (see fanout.py), each
        # under its own shared lock. The sweep reads the nodes' columns and takes no lock
        # itself: Ironic's node_periodic would build a task (the node, its driver, a lock and
        # their log lines) for every node only to hand its UUID on, a second task per poll.
        opts = OPTS()
        nodes = manager.iter_nodes(
            filters={"provision_state_in": list(job.WAIT_STATES), "reserved": False,
                     "maintenance": False},
            fields=["deploy_interface", "driver_internal_info"])
        grace, now = job.resume_grace(opts), time.time()
        due = sweep_order([(uuid, info) for uuid, _driver, _group, interface, info in nodes
                           if interface == INTERFACE and (
                               job.is_ours_info(info)
                               or job.resume_overdue_info(info, grace, now))],
                          FOLLOWERS, opts.poll_interval, opts.running_poll_interval)
        # A sweep hands nodes out for poll_interval at most, whatever kind they are (a starting
        # node waited for a slot up to a look's deadline: 70 s of a sweep that sleeping
        # ramdisks' starts held); the next sweep reads the nodes again, new arrivals first.
        deadline = time.monotonic() + opts.poll_interval
        limit = job.poll_limit()
        for uuid, starting, slow in due:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                FOLLOWERS.submit(uuid, manager._spawn_worker, follow.follow_in_worker, context,
                                 uuid, sent.for_ramdisk, manager._spawn_worker, limit=limit,
                                 wait=left, tags=pace.tags(starting, slow),
                                 shares=pace.shares(limit, pace.strained(FOLLOWERS, opts)))
            except (fanout.Busy, exception.NoFreeConductorWorker) as exc:
                LOG.warning("Following provision: %s; the rest of this sweep waits for the "
                            "next one", exc)
                return
