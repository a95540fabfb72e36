"""Step kinds a site adds without a fork: stevedore namespace `provision_agent.step_kinds`.

A plug-in is a class (named by its entry point; docs/extending.md is its contract, version
API_VERSION, re-exported by provision_agent.api) with:

    name         its key in the native document's top-level `extensions` object, and the
                 kind of its steps
    step         its Step subclass (steps.py): the arguments its steps carry in the plan
    schema       JSON Schema of its section of the document
    phase        where its steps run: one of PHASES (ALIASES: older names)
    api_version  "MAJOR.MINOR" of the API it was written for (default "1.0")
    secret_fields  names of its step's fields shown as <redacted> everywhere (optional)
    validate(section, layout) -> [message]      what cannot work, before anything is written
    plan(section, resolved) -> [Step]            its steps, fully resolved
    run(step, context) -> JSON-able result       carries one step out (provision_agent.api)

So a vendor step is checked with the rest of the document, shows in the plan like any other,
and runs through the executor's handler table with the same logging, events and failure
handling. Plug-ins load only when a document or a plan names one: a layout without
`extensions` never scans entry points. Whatever a plug-in raises comes back naming it and its
package: exit 2 from validate() and plan(), the run's exit code (4 unless typed) from run().
"""

import logging

from provision_agent import redact
from provision_agent.errors import (
    EXIT_COMMAND_FAILED,
    EXIT_INVALID_INPUT,
    InputError,
    Problem,
    ProvisionError,
)
from provision_agent.plan import steps

LOG = logging.getLogger(__name__)

NAMESPACE = "provision_agent.step_kinds"
API_VERSION = "1.1"   # 1.1: hardware plug-ins (run/hardware.py)
# In the order they run (docs/extending.md has the picture).
PHASES = ("first", "after_partitioning", "after_filesystems", "after_image", "before_boot",
          "after_boot", "last")
ALIASES = {"in_target": "after_boot"}
# the new system's root filesystem is mounted at the target root only in these
NEEDS_ROOT = ("after_image", "before_boot", "after_boot")
_LOADED = {}
_PACKAGES = {}


class PluginError(ProvisionError):
    """A plug-in that is missing or does not keep to the contract above (exit 2)."""

    exit_code = EXIT_INVALID_INPUT


class PluginStepError(ProvisionError):
    """A plug-in's step failed while running: names the plug-in, its package and the step;
    keeps the exit code of a typed error (a command that failed: 4), else 4."""

    exit_code = EXIT_COMMAND_FAILED

    def __init__(self, name, step, cause):
        self.plugin, self.step, self.cause = name, step, cause
        if isinstance(cause, ProvisionError):
            self.exit_code = cause.exit_code
        what = step.description or step.kind
        super().__init__(f"{who(name)} step {what!r}: {_text(cause)}")


def _text(exc):
    return str(exc) if isinstance(exc, ProvisionError) else f"{type(exc).__name__}: {exc}"


def package(name):
    """The distribution a loaded plug-in came from."""
    return _PACKAGES.get(name) or "unknown"


def who(name):
    """How errors name a plug-in: "plug-in 'NAME' (package X)"."""
    return f"plug-in {name!r} (package {package(name)})"


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
    dist = getattr(found[0], "dist", None)
    _PACKAGES[name] = dist.name if dist is not None else None
    try:
        plugin = found[0].load()()
    except Exception as exc:
        raise PluginError(f"{who(name)} cannot be loaded: {type(exc).__name__}: "
                          f"{exc}") from exc
    _check(plugin, name)
    if secret_fields(plugin):
        plugin.step.secret_fields = frozenset(plugin.step.secret_fields) | frozenset(
            secret_fields(plugin))
    steps.register(plugin.step)
    _LOADED[name] = plugin
    return plugin


def _check(plugin, name):
    for attr in ("name", "step", "schema", "phase", "validate", "plan", "run"):
        if not hasattr(plugin, attr):
            raise PluginError(f"{who(name)} has no {attr!r}")
    if plugin.name != name or plugin.step.kind != name:
        raise PluginError(f"{who(name)} calls itself {plugin.name!r} with steps of "
                          f"kind {plugin.step.kind!r}")
    if phase_of(plugin) not in PHASES:
        raise PluginError(f"{who(name)}: phase {plugin.phase!r} is not one of "
                          f"{', '.join(PHASES + tuple(ALIASES))}")
    wanted = str(getattr(plugin, "api_version", API_VERSION))
    if not _compatible(wanted):
        raise PluginError(f"{who(name)} needs plug-in API version {wanted}; this provision "
                          f"offers {API_VERSION} (provision_agent.api.API_VERSION): install a "
                          f"version of the plug-in written for API {API_VERSION.split('.')[0]}"
                          f".x, or a provision that offers {wanted}")
    unknown = set(secret_fields(plugin)) - {f.name for f in _fields(plugin.step)}
    if unknown:
        raise PluginError(f"{who(name)}: secret_fields {sorted(unknown)} are not fields of "
                          f"{plugin.step.__name__}")


def _fields(cls):
    import dataclasses
    return dataclasses.fields(cls)


def _compatible(wanted):
    """Same major version, a minor version this provision has reached."""
    have = API_VERSION.split(".")
    parts = wanted.split(".")
    if not all(p.isdigit() for p in parts) or len(parts) > 2:
        return False
    return parts[0] == have[0] and int((parts + ["0"])[1]) <= int(have[1])


def phase_of(plugin):
    return ALIASES.get(plugin.phase, plugin.phase)


def secret_fields(plugin):
    return tuple(getattr(plugin, "secret_fields", None) or ())


def _hide_section(plugin, section):
    """The document's values under the plug-in's secret names, hidden from every text before
    validate() can put one into a message."""
    names = set(secret_fields(plugin))
    todo = [section]
    while todo and names:
        value = todo.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if key in names:
                    redact.remember(item)
                todo.append(item)
        elif isinstance(value, list):
            todo.extend(value)


def _hide_step(step):
    for f in _fields(type(step)):
        if f.metadata.get("secret") or f.name in step.secret_fields:
            redact.remember(getattr(step, f.name))


def problems(layout):
    """[(where, message)] for the document's extension sections."""
    import jsonschema
    found = []
    root = any(fs.mount == "/" for fs in layout.filesystems)
    for name, section in sorted((layout.extensions or {}).items()):
        where = f"$.extensions.{name}"
        try:
            plugin = get(name)
        except PluginError as exc:
            found.append((where, str(exc)))
            continue
        _hide_section(plugin, section)
        if phase_of(plugin) in NEEDS_ROOT and not root:
            found.append((where, f"{who(name)}: its steps run in phase {plugin.phase!r}, "
                                 f"with the new system's root filesystem mounted, and this "
                                 f"layout mounts no '/' (a whole-disk image is written as it "
                                 f"is): use a layout with a root filesystem, or a plug-in "
                                 f"whose phase is one of {', '.join(_no_root_phases())}"))
            continue
        schema_errors = list(jsonschema.Draft202012Validator(plugin.schema).iter_errors(section))
        for err in schema_errors[:20]:
            path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.path)
            found.append((where + path, err.message[:300]))
        if not schema_errors:
            found += [(where, str(msg)[:500]) for msg in _validate(plugin, name, section,
                                                                     layout)]
    return found


def _no_root_phases():
    return [p for p in PHASES if p not in NEEDS_ROOT]


def _validate(plugin, name, section, layout):
    try:
        return list(plugin.validate(section, layout))
    except Exception as exc:
        LOG.debug("%s validate() raised", who(name), exc_info=True)
        return [f"{who(name)} validate() failed: {_text(exc)}"]


def planned(resolved, phase):
    """The extension steps of one phase, in the document's order of sections; InputError
    (exit 2) naming the plug-in when its plan() raises or returns what is not its step."""
    result = []
    for name, section in (resolved.layout.extensions or {}).items():
        plugin = get(name)
        if phase_of(plugin) != phase:
            continue
        where = f"$.extensions.{name}"
        try:
            made = list(plugin.plan(section, resolved))
        except Exception as exc:
            LOG.debug("%s plan() raised", who(name), exc_info=True)
            raise InputError([Problem(where, f"{who(name)} plan() failed: "
                                             f"{_text(exc)}")]) from exc
        for step in made:
            if not isinstance(step, plugin.step):
                raise InputError([Problem(where, f"{who(name)} plan() returned a "
                                                 f"{type(step).__name__}, not a "
                                                 f"{plugin.step.__name__}")])
            _hide_step(step)
            result.append(step)
    return result


def handler(kind, context):
    """The executor's handler for a plug-in kind: its run() with the API's context
    (provision_agent.api.Context); any failure comes back as PluginStepError."""
    plugin = get(kind)

    def run(step):
        try:
            return plugin.run(step, context)
        except Exception as exc:
            LOG.debug("%s run() raised", who(kind), exc_info=True)
            raise PluginStepError(kind, step, exc) from exc
    return run
