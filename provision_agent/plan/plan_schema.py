"""The JSON plan's schema, made from the step classes (steps.py): what `--plan_format json`
prints and Ironic shows. schema/plan-v1.json and docs/plan-format.md are written from here by
scripts/plan_format.py, and a unit test keeps both equal to what this module makes and checks
the planner's output against the schema."""

import dataclasses
import types
import typing

from provision_agent.plan import steps

_JSON = {str: "string", int: "integer", bool: "boolean", float: "number", list: "array",
         dict: "object"}


def _types(hint):
    """JSON types of a field's annotation (`str | None` → ["string", "null"])."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return [t for arg in typing.get_args(hint) for t in _types(arg)]
    if hint is type(None):
        return ["null"]
    return [_JSON[typing.get_origin(hint) or hint]]


def arguments(cls):
    """[(name, JSON types, required, description)] of a step class's arguments."""
    hints = typing.get_type_hints(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if f.name == "description":
            continue
        optional = bool(f.metadata.get("optional"))
        rows.append((f.metadata.get("name", f.name), _types(hints[f.name]), not optional))
    return rows


def step_schema(cls):
    props, required = {}, []
    for name, json_types, needed in arguments(cls):
        props[name] = {"type": json_types[0] if len(json_types) == 1 else json_types}
        if needed:
            required.append(name)
    return {"type": "object", "required": ["kind", "args", "description"],
            "additionalProperties": False,
            "properties": {
                "kind": {"const": cls.kind},
                "description": {"type": "string"},
                "args": {"type": "object", "properties": props, "required": required,
                         "additionalProperties": False}},
            "description": " ".join((cls.__doc__ or "").split())}


def schema(kinds=None, plugins=None):
    """plan-v1.json (kinds: the built-in steps); plugins: [(name, package, step class,
    its args' schema or None)] composes the schema of a plan that may carry their steps."""
    kinds = kinds or steps.BUILT_IN
    out = _schema(kinds)
    for name, package, cls, args in plugins or ():
        defined = step_schema(cls)
        if args is not None:
            defined["properties"]["args"] = args
        defined["description"] += f" (plug-in {name!r}, package {package})"
        out["$defs"][cls.kind] = defined
        out["properties"]["steps"]["items"]["oneOf"].append({"$ref": f"#/$defs/{cls.kind}"})
    return out


def composed():
    """The schema of a plan with the installed plug-ins' steps: `provision plan-schema`."""
    from provision_agent.plan import extensions
    found = []
    for name in extensions.names():
        plugin = extensions.get(name)
        found.append((name, extensions.package(name), plugin.step,
                      getattr(plugin, "step_schema", None)))
    return schema(plugins=found)


def _schema(kinds):
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://provision-agent.invalid/schema/plan-v1.json",
        "title": "provision-agent plan, version 1 (provision --dry_run --plan_format json)",
        "type": "object",
        "required": ["layout", "steps", "warnings"],
        "additionalProperties": False,
        "properties": {
            "layout": {"type": "object", "description": "The resolved layout: disks with "
                       "their devices and placed partitions, arrays, volume groups, "
                       "filesystems, images."},
            "warnings": {"type": "array", "items": {"type": "string"}},
            "steps": {"type": "array", "items": {"oneOf": [
                {"$ref": f"#/$defs/{cls.kind}"} for cls in kinds]}},
        },
        "$defs": {cls.kind: step_schema(cls) for cls in kinds},
    }


def markdown_table(kinds=None):
    lines = ["| kind | arguments (`?`: absent unless set) | what it does |", "|---|---|---|"]
    for cls in kinds or steps.BUILT_IN:
        args = ", ".join(f"`{name}`{'' if needed else '?'}"
                         for name, _types_, needed in arguments(cls))
        doc = " ".join((cls.__doc__ or "").split()).replace("|", "\\|")
        lines.append(f"| `{cls.kind}` | {args} | {doc} |")
    return "\n".join(lines)
