"""Loop devices are never disks (drivers/discovery.py) unless `--allow_loop_devices` is given,
and then only those a document names by match.name: a layout or a plug-in tried on a
developer's machine (docs/extending.md). A document naming one without the flag is told so.
"""


NOTE = ("; loop devices are never disks unless provision runs with --allow_loop_devices, "
        "which accepts those the document names by match.name (trying a layout or a "
        "plug-in on a developer's machine: docs/extending.md)")


def note(disk):
    named = [str(h.get("name", "")) for h in [disk.hints] + disk.fallback_hints]
    return NOTE if any(n.startswith("/dev/loop") for n in named) else ""


def named_loops(layout):
    """The loop devices the layout's disks name (match.name): what --allow_loop_devices lets
    discovery list."""
    return sorted({str(h["name"]) for d in layout.disks for h in [d.hints] + d.fallback_hints
                   if str(h.get("name", "")).startswith("/dev/loop")})
