"""Problems the native checks find in a translated Fuel document, named at Fuel's places.

The translation checks what it can in Fuel's terms; whatever the native schema still refuses
(a file system provision cannot make, a mount that is no absolute path, a label too long, a
size no disk has) is reported by the native driver at a path of the translated document,
`$.filesystems[1].label`. Every translated object carries its Fuel place as `origin`, so such
a path becomes that place and Fuel's name of the field: `ks_spaces[0] (sda) volumes[2].disk_label`.
"""

import re

from provision_agent.errors import Problem

_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[([0-9]+)\]")

# (the list the object is in, the native field) → the Fuel field it came from
FUEL_FIELDS = {
    ("filesystems", "type"): "file_system", ("filesystems", "label"): "disk_label",
    ("filesystems", "mount"): "mount",
    ("partitions", "size"): "size", ("partitions", "type_guid"): "partition_guid",
    ("logical_volumes", "size"): "size", ("logical_volumes", "name"): "name",
    ("volume_groups", "name"): "id", ("raids", "name"): "mount",
    ("disks", "match"): "extra/id/name", ("disks", "fallback_match"): "extra/id/name",
    ("images", "uri"): "uri", ("images", "compression"): "container",
    ("bootloader", "kernel_params"): "",         # its origin is the field itself
}


def _steps(location):
    """'$.disks[0].size' → ['disks', 0, 'size'], or None for anything else."""
    if not location.startswith("$"):
        return None
    steps, pos = [], 1
    while pos < len(location):
        m = _STEP.match(location, pos)
        if not m:
            return None
        steps.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
        pos = m.end()
    return steps


def fuel_problem(document, problem):
    """problem, its native path replaced by the Fuel place of the deepest object on it."""
    steps = _steps(problem.location)
    if not steps:
        return problem
    node, origin, rest, listed = document, None, steps, None
    for k, step in enumerate(steps):
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(node, dict) and isinstance(node.get("origin"), str):
            origin, rest = node["origin"], steps[k + 1:]
            listed = steps[k - 1] if isinstance(step, int) and k else step
    if origin is None:
        return problem
    field = FUEL_FIELDS.get((listed, rest[0])) if rest else None
    if field is not None:
        return Problem(f"{origin}.{field}" if field else origin, problem.message)
    inner = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in rest).lstrip(".")
    return Problem(origin, f"{inner}: {problem.message}" if inner else problem.message)
