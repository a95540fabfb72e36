"""Hardware plug-ins (stevedore namespace `provision_agent.hardware`, plug-in API 1.1): what
ironic-python-agent's hardware managers give a vendor, for this ramdisk. docs/extending.md is
the contract; in short, a class with

    api_version   "1.1" (this module's parts of the API came with 1.1)
    name          its name (lowercase, a-z0-9_), as errors show it
    steps         [api.IronicStep]: Ironic clean/deploy/service steps of the deploy interface
    supports(inventory) -> int   0: not this machine's hardware; otherwise a rank (IPA's
                  HardwareSupport: 1 generic, 2 mainline, 3 service provider)
    run_step(name, args, context) -> JSON-able    carries one of its steps out
    erase_device(disk, mode, context) -> str | None   optional: erase one whole disk its own
                  way ("full"/"express" erases); the method's name, or None for provision's
    inventory(inventory) -> inventory                  optional: the inventory as it knows it

Only plug-ins whose supports() is above 0 on this machine count. A step name offered by two
is the higher-ranked one's (ties: the name order of the plug-ins), and so is the erase and
the inventory: the highest-ranked plug-in that defines the method. Everything a plug-in raises
comes back naming it and its package (PluginStepError, exit 4 unless typed).
"""

import dataclasses
import importlib.metadata
import logging
import re

from provision_agent import errors
from provision_agent.errors import InputError, Problem
from provision_agent.plan import extensions

LOG = logging.getLogger(__name__)
NAMESPACE = "provision_agent.hardware"
STEP_TYPES = ("clean", "deploy", "service")
NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")
# the deploy interface's own steps (ironic_driver/deploy.py) and Ironic's flow steps
RESERVED = frozenset(("deploy", "set_layout", "prepare_instance_boot", "reboot_to_instance",
                      "erase_devices", "erase_devices_metadata", "erase_devices_express",
                      "power_on", "power_off", "reboot", "hold", "wait"))
MAX_STEPS = 64


@dataclasses.dataclass(frozen=True)
class IronicStep:
    """One Ironic step a hardware plug-in offers, on the deploy interface (API 1.1)."""
    name: str                           # the step's name in Ironic (`deploy.NAME`)
    description: str                    # one line: what it does
    priority: int = 0                   # 0: only when asked for (manual cleaning, a template)
    types: tuple = ("clean",)           # which of clean, deploy, service
    args_schema: dict = dataclasses.field(default_factory=lambda: {"type": "object"})
    abortable: bool = False

    def for_ironic(self, plugin):
        """The step as Ironic's get_*_steps list it, with argsinfo from the schema."""
        props = self.args_schema.get("properties") or {}
        required = set(self.args_schema.get("required") or ())
        argsinfo = {name: {"description": str(spec.get("description") or name)[:200],
                           "required": name in required} for name, spec in props.items()}
        return {"step": self.name, "interface": "deploy", "priority": self.priority,
                "types": list(self.types), "description": self.description[:300],
                "argsinfo": argsinfo or None, "args_schema": self.args_schema,
                "abortable": self.abortable,
                "plugin": plugin}


@dataclasses.dataclass
class HardwareContext:
    """run_step's and erase_device's context (API 1.1)."""
    runner: object          # as api.Context.runner
    events: object          # as api.Context.events
    inventory: dict         # this machine's inventory, as `provision inventory` prints it
    plugin: str             # the plug-in's name, as errors show it


def _entry_points():
    return sorted(importlib.metadata.entry_points(group=NAMESPACE), key=lambda ep: ep.name)


def _load(ep):
    dist = getattr(ep, "dist", None)
    extensions._PACKAGES[ep.name] = dist.name if dist is not None else None
    try:
        plugin = ep.load()()
    except Exception as exc:
        raise extensions.PluginError(f"{extensions.who(ep.name)} cannot be loaded: "
                                     f"{type(exc).__name__}: {exc}") from exc
    _check(plugin, ep.name)
    return plugin


def _check(plugin, name):
    who = extensions.who(name)
    for attr in ("name", "steps", "supports", "run_step"):
        if not hasattr(plugin, attr):
            raise extensions.PluginError(f"{who} has no {attr!r}")
    wanted = str(getattr(plugin, "api_version", "1.0"))
    if wanted.split(".")[:1] != ["1"] or not extensions._compatible(wanted) or wanted == "1.0":
        raise extensions.PluginError(f"{who}: hardware plug-ins need plug-in API 1.1 or "
                                     f"later (it says {wanted}; this provision offers "
                                     f"{extensions.API_VERSION})")
    if len(plugin.steps) > MAX_STEPS:
        raise extensions.PluginError(f"{who} offers more than {MAX_STEPS} steps")
    for step in plugin.steps:
        bad = _step_problem(step)
        if bad:
            raise extensions.PluginError(f"{who} step {getattr(step, 'name', step)!r}: {bad}")


def _step_problem(step):
    if not isinstance(step, IronicStep):
        return "not an api.IronicStep"
    if not NAME_RE.fullmatch(step.name) or step.name in RESERVED:
        return "its name must match [a-z][a-z0-9_]{0,63} and not be one of the deploy " \
               "interface's own steps"
    if not step.types or set(step.types) - set(STEP_TYPES):
        return f"types must be some of {', '.join(STEP_TYPES)}"
    if not isinstance(step.priority, int) or not 0 <= step.priority <= 1000:
        return "priority must be a whole number, 0 to 1000"
    if step.args_schema.get("type") != "object":
        return "args_schema must be a JSON schema of type object"
    return None


def _rank(plugin, name, inventory):
    try:
        return int(plugin.supports(inventory) or 0)
    except Exception as exc:
        LOG.warning("%s supports() failed (%s: %s); it is left out", extensions.who(name),
                    type(exc).__name__, exc)
        return 0


def supported(inventory):
    """[(rank, name, plugin)] of the installed plug-ins that support this machine, highest
    rank first."""
    found = []
    for ep in _entry_points():
        plugin = _load(ep)
        rank = _rank(plugin, ep.name, inventory)
        if rank > 0:
            found.append((rank, ep.name, plugin))
        else:
            LOG.info("%s does not support this machine", extensions.who(ep.name))
    return sorted(found, key=lambda item: (-item[0], item[1]))


def listing(inventory):
    """What `provision steps` prints: the plug-ins that support this machine and the steps
    they offer here (a name offered twice is the higher-ranked plug-in's)."""
    ranked = supported(inventory)
    steps = {}
    for _rank_, name, plugin in ranked:
        for step in plugin.steps:
            steps.setdefault(step.name, step.for_ironic(name))
    return {"hardware": [{"plugin": name, "package": extensions.package(name), "support": rank}
                         for rank, name, _ in ranked],
            "steps": sorted(steps.values(), key=lambda s: s["step"])}


def _request(document):
    if not isinstance(document, dict) or set(document) - {"step", "type", "args"} or \
            not isinstance(document.get("step"), str) or \
            document.get("type", "clean") not in STEP_TYPES or \
            not isinstance(document.get("args", {}), dict):
        raise InputError([Problem("$", "the step input is {\"step\": NAME, \"type\": one of "
                                       f"{', '.join(STEP_TYPES)}, \"args\": {{...}}}}")])
    return document["step"], document.get("type", "clean"), document.get("args") or {}


def find(ranked, name, kind):
    """(plug-in name, plug-in, IronicStep) offering step `name` for `kind`; InputError
    otherwise."""
    for _rank_, plugin_name, plugin in ranked:
        for step in plugin.steps:
            if step.name == name:
                if kind not in step.types:
                    raise InputError([Problem("$.type", f"step {name!r} of "
                                              f"{extensions.who(plugin_name)} is not a "
                                              f"{kind} step (it is {', '.join(step.types)})")])
                return plugin_name, plugin, step
    offered = sorted({s.name for _, _, p in ranked for s in p.steps})
    raise InputError([Problem("$.step", f"no hardware plug-in supporting this machine offers "
                                        f"a step {name!r} (offered: "
                                        f"{', '.join(offered) or 'none'})")])


def run_step(document, inventory, runner, events, dry_run=False):
    """Run the step the input names: its arguments checked against its schema first;
    dry_run: only checked."""
    import jsonschema
    name, kind, args = _request(document)
    plugin_name, plugin, step = find(supported(inventory), name, kind)
    problems = [Problem("$.args" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                                           for p in err.path), err.message[:300])
                for err in jsonschema.Draft202012Validator(step.args_schema).iter_errors(args)]
    if problems:
        raise InputError(problems[:20])
    if dry_run:
        return {"step": name, "type": kind, "plugin": plugin_name, "dry_run": True}
    context = HardwareContext(runner, events, inventory, plugin_name)
    events.step(1, 1, name, "start", description=step.description[:300])
    try:
        result = plugin.run_step(name, args, context)
    except Exception as exc:
        failure = extensions.PluginStepError(plugin_name, _Named(step), exc)
        events.step(1, 1, name, "failed", description=str(failure)[:1000])
        raise failure from exc
    events.step(1, 1, name, "done", description=step.description[:300])
    return {"step": name, "type": kind, "plugin": plugin_name, "result": result}


@dataclasses.dataclass
class _Named:
    """What PluginStepError reads of a step: its description, else its kind."""
    description: str
    kind: str

    def __init__(self, step):
        self.description, self.kind = step.description, step.name


def override(ranked, method):
    """(name, plug-in) of the highest-ranked supporting plug-in that defines method; None."""
    for _rank_, name, plugin in ranked:
        if callable(getattr(plugin, method, None)):
            return name, plugin
    return None


def inventory(own):
    """The inventory `provision inventory` prints: provision's own, or the one the
    highest-ranked plug-in defining inventory() makes of it."""
    chosen = override(supported(own), "inventory")
    if chosen is None:
        return own
    name, plugin = chosen
    try:
        made = plugin.inventory(own)
    except Exception as exc:
        raise extensions.PluginError(f"{extensions.who(name)} inventory() failed: "
                                     f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(made, dict) or not isinstance(made.get("disks"), list):
        raise extensions.PluginError(f"{extensions.who(name)} inventory() returned no "
                                     "inventory with a list of disks")
    return made


def erase_device(ranked, disk, mode, runner, events, inventory):
    """The method a plug-in erased disk with, or None (provision erases it itself)."""
    chosen = override(ranked, "erase_device")
    if chosen is None:
        return None
    name, plugin = chosen
    try:
        said = plugin.erase_device(disk, mode, HardwareContext(runner, events, inventory, name))
    except errors.ProvisionError as exc:
        raise errors.CommandError(["erase", disk], getattr(exc, "returncode", 1),
                                  reason=f"{extensions.who(name)} erase_device: {exc}") from exc
    except Exception as exc:
        raise errors.CommandError(["erase", disk], 1, reason=f"{extensions.who(name)} "
                                  f"erase_device: {type(exc).__name__}: {exc}") from exc
    return f"{name}: {said}" if said else None
