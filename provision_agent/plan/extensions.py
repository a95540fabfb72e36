"""Step kinds a site adds without a fork: stevedore namespace `provision_agent.step_kinds`.

A plug-in is a class (named by its entry point; docs/extending.md) with:

    name       its key in the native document's top-level `extensions` object, and the
               kind of its steps
    step       its Step subclass (steps.py): the arguments its steps carry in the plan
    schema     JSON Schema of its section of the document
    phase      where its steps run: "first" (before any disk is wiped: a RAID controller, a
               firmware), "in_target" (with the new system mounted, before it is unmounted)
               or "last" (after everything)
    validate(section, layout) -> [message]      what cannot work, before anything is written
    plan(section, resolved) -> [Step]            its steps, fully resolved
    run(step, context) -> JSON-able result       carries one step out; context has runner,
                                                 events, target_root, options

So a vendor step is checked with the rest of the document, shows in the plan like any other,
and runs through the executor's handler table with the same logging, events and failure
handling. Plug-ins load only when a document or a plan names one: a layout without
`extensions` never scans entry points.
"""

import dataclasses
import logging

from provision_agent.plan import steps

LOG = logging.getLogger(__name__)

NAMESPACE = "provision_agent.step_kinds"
PHASES = ("first", "in_target", "last")
_LOADED = {}


class PluginError(Exception):
    """A plug-in that is missing or does not keep to the contract above."""


def names():
    import importlib.metadata
    return sorted({ep.name for ep in importlib.metadata.entry_points(group=NAMESPACE)})


def get(name):
    """The plug-in named `name`, loaded once; PluginError when none is installed."""
    if name in _LOADED:
        return _LOADED[name]
    import importlib.metadata
    found = [ep for ep in importlib.metadata.entry_points(group=NAMESPACE) if ep.name == name]
    if not found:
        raise PluginError(f"no step kind {name!r} is installed (installed: "
                          f"{', '.join(names()) or 'none'})")
    try:
        plugin = found[0].load()()
    except Exception as exc:
        raise PluginError(f"step kind {name!r} cannot be loaded: {type(exc).__name__}: "
                          f"{exc}") from exc
    _check(plugin, name)
    steps.register(plugin.step)
    _LOADED[name] = plugin
    return plugin


def _check(plugin, name):
    for attr in ("name", "step", "schema", "phase", "validate", "plan", "run"):
        if not hasattr(plugin, attr):
            raise PluginError(f"step kind {name!r} has no {attr!r}")
    if plugin.name != name or plugin.step.kind != name:
        raise PluginError(f"step kind {name!r} calls itself {plugin.name!r} with steps of "
                          f"kind {plugin.step.kind!r}")
    if plugin.phase not in PHASES:
        raise PluginError(f"step kind {name!r}: phase {plugin.phase!r} is not one of "
                          f"{', '.join(PHASES)}")


def problems(layout):
    """[(where, message)] for the document's extension sections."""
    import jsonschema
    found = []
    for name, section in sorted((layout.extensions or {}).items()):
        where = f"$.extensions.{name}"
        try:
            plugin = get(name)
        except PluginError as exc:
            found.append((where, str(exc)))
            continue
        schema_errors = list(jsonschema.Draft202012Validator(plugin.schema).iter_errors(section))
        for err in schema_errors[:20]:
            path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.path)
            found.append((where + path, err.message[:300]))
        if not schema_errors:
            found += [(where, str(msg)[:500]) for msg in plugin.validate(section, layout)]
    return found


def planned(resolved, phase):
    """The extension steps of one phase, in the document's order of sections."""
    result = []
    for name, section in (resolved.layout.extensions or {}).items():
        plugin = get(name)
        if plugin.phase == phase:
            for step in plugin.plan(section, resolved):
                if not isinstance(step, plugin.step):
                    raise PluginError(f"step kind {name!r} planned a {type(step).__name__}")
                result.append(step)
    return result


@dataclasses.dataclass
class Context:
    """What a plug-in's run() may use: the same runner (logged, typed errors) and events the
    built-in steps use, and where the new system is mounted."""
    runner: object
    events: object
    target_root: str
    options: dict


def handler(executor, kind):
    """The executor's handler for a plug-in kind."""
    plugin = get(kind)
    context = Context(executor.runner, executor.events, executor.root, executor.options)
    return lambda step: plugin.run(step, context)
