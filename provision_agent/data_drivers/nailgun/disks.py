"""Which disk a Fuel disk space means: its identifiers (`extra` links, `id`, `name`) as native
hints, in fuel-agent's order (docs/nailgun-mapping.md, "Disk spaces")."""

import re

MAX_DISK_HINTS = 16
KERNEL_NAME = re.compile(r"dm-[0-9]+|[a-z]+[0-9a-z]*")


def _hint(ident):
    """One Fuel identifier as a native hint: a by-path or by-id link, or a kernel name."""
    ident = ident[len("/dev/"):] if ident.startswith("/dev/") else ident
    if ident.startswith("disk/by-path/"):
        return {"by_path": "/dev/" + ident}
    if ident.startswith("disk/"):
        return {"by_id": "/dev/" + ident}
    if ident.startswith("mapper/"):
        return {"name": "/dev/" + ident}        # a multipath disk, as fuel-agent named it
    if KERNEL_NAME.fullmatch(ident):
        return {"name": "/dev/" + ident}        # sda, nvme0n1, md123: a name, not a link
    return {"by_id": "/dev/disk/by-id/" + ident}


def disk_hints(space):
    """Fuel's identifiers in fuel-agent's order: every `extra` link, the `id`, then the `name`
    (its fallback). Returns the first as the native match and the rest as fallback_match."""
    extra = space.get("extra") or []
    extra = [extra] if isinstance(extra, str) else extra if isinstance(extra, list) else []
    idents = [e for e in extra[:MAX_DISK_HINTS] if isinstance(e, str) and e.strip()]
    idents += [v for v in (space.get("id"), space.get("name")) if isinstance(v, str) and v.strip()]
    hints = []
    for ident in idents:
        h = _hint(ident.strip())
        if h not in hints:
            hints.append(h)
    hints = hints[:MAX_DISK_HINTS + 1]
    return (hints[0] if hints else {}), hints[1:]
