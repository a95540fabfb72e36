"""The ramdisk's vendor steps: what its hardware plug-ins offer (`provision steps`,
provision_agent/run/hardware.py), kept in the node, listed by the deploy interface beside its
own steps and run in the ramdisk (`provision step`) as any job of ours.

As ironic-python-agent's agent_base: with [provision_agent]ramdisk_steps, prepare_cleaning
returns CLEANWAIT; the first look at the booted ramdisk runs the job `provision steps` there
(where IPA's first heartbeat calls get_clean_steps), its "steps" event is kept in
driver_internal_info/provision_ramdisk_steps (IPA: agent_cached_clean_steps), and then, as
IPA's heartbeat does, Ironic's set_node_cleaning_steps (the manual cleaning's steps checked
against them) and continue_node_clean. A vendor step Ironic executes is a job `provision step`
with {"step", "type", "args"} in the ramdisk the node runs; its end resumes the steps like the
end of an erase. A servicing of an active node lists them first too (prepare_service, then
set_node_service_steps). Where this differs from agent_base: docs/ironic.md "Vendor steps".
"""

import logging
import re

from ironic.common import exception, states
from ironic.conductor import steps as conductor_steps
from ironic.conductor import utils as manager_utils

from ironic_driver import ironic_compat, report
from ironic_driver.conversation import job, record

LOG = logging.getLogger(__name__)
P = job.PREFIX
CACHE = job.RAMDISK_STEPS           # {"clean": [step], "deploy": [step], "service": [step]}
LISTING = job.LISTING               # this cleaning's first job lists them
TYPES = ("clean", "deploy", "service")
NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
MAX_STEPS = 256
# the deploy interface's own steps (deploy.py), which a vendor step cannot take
OWN = frozenset(("deploy", "set_layout", "prepare_instance_boot", "reboot_to_instance",
                 "erase_devices", "erase_devices_metadata", "erase_devices_express"))


class BadListing(ValueError):
    """What the ramdisk listed is not a list of steps."""


listing = job.listing


def steps_for(node, kind):
    """Copies of the cached vendor steps of kind (clean, deploy, service), in Ironic's form."""
    return [dict(s) for s in (node.driver_internal_info.get(CACHE) or {}).get(kind, [])]


def names(node, kind):
    return {s["step"] for s in steps_for(node, kind)}


def is_vendor(node, kind, step):
    return (step or {}).get("interface") == "deploy" and step.get("step") in names(node, kind)


def parse(event, own=OWN):
    """The cache from a "steps" event; BadListing for what is not one. own: the deploy
    interface's step names, which a vendor step cannot take."""
    steps = event.get("steps")
    if not isinstance(steps, list) or len(steps) > MAX_STEPS:
        raise BadListing(f"its steps are not a list of at most {MAX_STEPS}")
    cache = {kind: [] for kind in TYPES}
    for step in steps:
        if not isinstance(step, dict) or not NAME_RE.fullmatch(str(step.get("step"))) \
                or step["step"] in own or step.get("interface") != "deploy" \
                or not isinstance(step.get("priority"), int) \
                or not isinstance(step.get("types"), list):
            raise BadListing(f"a step is not a deploy-interface step of its own: "
                             f"{report.bounded(str(step), 300)}")
        argsinfo = step.get("argsinfo") if isinstance(step.get("argsinfo"), dict) else None
        ironic_step = {"step": step["step"], "interface": "deploy",
                       "priority": max(0, min(step["priority"], 1000)),
                       "argsinfo": argsinfo, "abortable": bool(step.get("abortable")),
                       "requires_ramdisk": True,
                       "description": str(step.get("description", ""))[:300]}
        for kind in TYPES:
            if kind in step["types"]:
                cache[kind].append(ironic_step)
    return cache


def from_events(events, own=OWN):
    """(the cache, if a "steps" event is among events, else None; the other events)."""
    cache, rest = None, []
    for event in events:
        if isinstance(event, dict) and event.get("event") == "steps":
            cache = parse(event, own)
        else:
            rest.append(event)
    return cache, rest


# the states a vendor step of each kind runs in: (waiting, running its execute)
IN = {"clean": (states.CLEANWAIT, states.CLEANING), "deploy": (states.DEPLOYWAIT,
                                                                states.DEPLOYING),
      "service": (states.SERVICEWAIT, states.SERVICING)}


def request(node):
    """`provision step`'s input for the vendor step the node is in; None when it is in none."""
    for kind, in_states in IN.items():
        step = getattr(node, f"{kind}_step")
        if node.provision_state in in_states and is_vendor(node, kind, step):
            return {"step": step["step"], "type": kind, "args": step.get("args") or {}}
    return None


def list_first(task, reuse, start, provision_input):
    """prepare_cleaning's end, the node in its ramdisk (job.begin done): with
    [provision_agent]ramdisk_steps, CLEANWAIT and the listing as the first job (started at
    once by start, fast_track.start_or_power_cycle, in a ramdisk fast track kept); else None,
    Ironic going on with the steps."""
    node = task.node
    if not job.opts().ramdisk_steps:
        return None
    node.set_driver_internal_info(LISTING, True)
    node.save()
    if reuse:
        start(task, provision_input)
    return states.CLEANWAIT


def begin(task, kind):
    """Before a vendor step's job: the node waits for it in the ramdisk it runs (job.begin_next).
    A deploy step needs the ramdisk the deploy step booted: it runs after deploy.deploy."""
    node = task.node
    if kind == "deploy" and node.driver_internal_info.get(P + "phase") != "done":
        raise exception.InstanceDeployFailure(
            f"deploy step deploy.{node.deploy_step.get('step')} runs in the ramdisk, which "
            "boots with deploy.deploy (priority 100) and is powered off by "
            "deploy.reboot_to_instance (20): give it a priority between 21 and 99")
    job.begin_next(node)
    node.save()
    return IN[kind][0]


def resume_after_listing(task, updates):
    """The listing's job exited 0: what IPA's first heartbeat of a cleaning does once it has
    the agent's steps: Ironic's set_node_cleaning_steps (a manual cleaning's steps checked
    against them), then the cleaning continues."""
    updates[LISTING] = None
    if not record.take(task, updates, still=listing):
        return
    node = task.node        # the lock's upgrade loaded it afresh
    kind = job.STEP_TYPE[node.provision_state]
    try:
        if kind == "clean":
            ironic_compat.set_node_cleaning_steps(task)
        else:
            conductor_steps.set_node_service_steps(task)
    except (exception.InvalidParameterValue, exception.NodeCleaningFailure,
            exception.NodeServicingFailure) as exc:
        offered = ", ".join(sorted(names(node, kind))) or "no vendor steps"
        record.fail(task, f"the {kind} steps asked for cannot run on this node: {exc} (its "
                          f"ramdisk offers {offered})")
        return
    finally:
        record.WRITER.leave()
    LOG.info("Node %s: its ramdisk offers %d vendor %s step(s); continuing", node.uuid,
             len(steps_for(node, kind)), kind)
    getattr(manager_utils, f"notify_conductor_resume_{kind}")(task)


class VendorSteps:
    """The deploy interface's part: the ramdisk's vendor steps listed beside its own steps,
    and run in the ramdisk when Ironic executes one."""

    def get_clean_steps(self, task):
        return super().get_clean_steps(task) + steps_for(task.node, "clean")

    def get_deploy_steps(self, task):
        return super().get_deploy_steps(task) + steps_for(task.node, "deploy")

    def execute_clean_step(self, task, step):
        if is_vendor(task.node, "clean", step):
            return begin(task, "clean")
        return super().execute_clean_step(task, step)

    def execute_deploy_step(self, task, step):
        if is_vendor(task.node, "deploy", step):
            return begin(task, "deploy")
        return super().execute_deploy_step(task, step)

    # ---- servicing an active node (Ironic 2023.2+): the ramdisk booted, its steps listed
    # first, as IPA's servicing; its vendor service steps run there; then the instance again

    def get_service_steps(self, task):
        return super().get_service_steps(task) + steps_for(task.node, "service")

    def execute_service_step(self, task, step):
        if is_vendor(task.node, "service", step):
            return begin(task, "service")
        return super().execute_service_step(task, step)

    def prepare_service(self, task):
        """As Ironic's prepare_inband_service, with this interface's ramdisk options and
        job: the instance's boot and tenant network left for the servicing ones."""
        from ironic.drivers import utils as driver_utils
        node = task.node
        with driver_utils.power_off_and_on(task):
            task.driver.boot.clean_up_instance(task)
            with manager_utils.power_state_for_network_configuration(task):
                task.driver.network.unconfigure_tenant_networks(task)
                task.driver.network.add_servicing_network(task)
            node.set_driver_internal_info("agent_start_attempted", True)
            task.driver.boot.prepare_ramdisk(task, job.ramdisk_options(node))
            job.begin(node)
            node.set_driver_internal_info(LISTING, True)
            node.save()
        return states.SERVICEWAIT

    def tear_down_service(self, task):
        """Ironic's tear_down_inband_service: the node off, the instance's boot and tenant
        network back, powered on."""
        from ironic.drivers.modules import deploy_utils
        deploy_utils.tear_down_inband_service(task)
        job.forget(task.node)
        task.node.save()
