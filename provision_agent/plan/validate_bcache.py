"""Checks of the bcache layer (model.Bcache) before anything is written.

A bcache device stands on a backing device (a partition, an array or a whole disk) and, when it
has one, a cache device of the same kinds. Several bcache devices may share a cache device:
it is one cache set caching each of them. Neither may be anything else's (a filesystem, a
member, a physical volume), nor kept: make-bcache writes its superblock at their start.
grub reads no bcache, so what it boots from (/boot, or / without a /boot) is not on one.
"""

from collections import Counter

from provision_agent.errors import Problem


def _where(obj):
    return obj.origin or getattr(obj, "id", "?")


def below(layout):
    """{device id: the ids it is built on directly} for every stacked device of layout."""
    out = {p.id: [holder.id] for holder, p in layout.partitions()}
    out.update({r.id: list(r.members + r.spares) for r in layout.raids})
    out.update({b.id: [b.backing] + ([b.cache] if b.cache else []) for b in layout.bcache})
    out.update({e.id: [e.device] for e in layout.encrypted})
    for vg in layout.volume_groups:
        out[vg.id] = list(vg.pvs)
        out.update({lv.id: [vg.id] for lv in vg.logical_volumes})
    return out


def on_bcache(layout, device):
    """The bcache ids that device is on (itself, or anything under it), in layout order."""
    ids, under, seen, todo = {b.id for b in layout.bcache}, below(layout), set(), [device]
    while todo:
        ref = todo.pop()
        if ref not in seen:
            seen.add(ref)
            todo += under.get(ref, [])
    return [b.id for b in layout.bcache if b.id in seen and b.id in ids]


def check(layout, use, usable):
    """Problems of layout.bcache; use(ref, obj, what, allowed) counts each backing device and
    each cache set once as a user of its device (validate._Ids)."""
    if not layout.bcache:
        return []
    problems = []
    add = lambda obj, msg: problems.append(Problem(_where(obj), msg))  # noqa: E731
    names = Counter(b.name for b in layout.bcache)
    kept = layout.kept_ids()
    caches, backings = set(), {b.backing for b in layout.bcache}
    for b in layout.bcache:
        use(b.backing, b, "backing_device", usable)
        if b.cache and b.cache not in caches:
            caches.add(b.cache)
            use(b.cache, b, "cache_device", usable)
        if names[b.name] > 1:
            add(b, f"duplicate bcache name {b.name!r}")
        if b.cache and b.cache in backings:
            add(b, f"cache_device {b.cache!r} is a backing device: a device is one or the other")
        for what, ref in (("backing_device", b.backing), ("cache_device", b.cache)):
            if ref in kept:
                add(b, f"{what} {ref!r} is kept: make-bcache writes its superblock at its start;"
                       " bcache devices are made anew, give it a partition that is not kept")
        if b.cache is None and b.cache_mode != "writethrough":
            add(b, f"cache_mode {b.cache_mode!r} without a cache_device: a bcache device "
                   "without a cache has no mode; add the cache_device or leave cache_mode out")
    _check_partitions(layout, add)
    _check_boot(layout, add)
    return problems


def _check_partitions(layout, add):
    """A bcache device's partitions are made with it: none kept, none firmware reads; their
    links (NAME1, NAMEp1) are no other bcache device's label."""
    names = {b.name: b for b in layout.bcache}
    on_bcache = {p.id: b.id for b in layout.bcache for p in b.partitions}
    # arrays and bcache devices are made before any bcache device's partitions exist
    for obj, refs in [(r, r.members + r.spares) for r in layout.raids] + [
            (b, [b.backing, b.cache]) for b in layout.bcache]:
        for ref in (ref for ref in refs if ref in on_bcache):
            add(obj, f"{ref!r} is a partition of bcache {on_bcache[ref]!r}: arrays and bcache "
                     f"devices are made before it; put them under the bcache device instead")
    for b in (b for b in layout.bcache if b.partitions):
        for i, p in enumerate(b.partitions, 1):
            if p.keep or p.keep_if_present:
                add(p, f"a partition of bcache {b.id!r} is kept: bcache devices are made anew, "
                       f"and their tables with them")
            if p.type in ("bios_grub", "esp"):
                add(p, f"a {p.type} partition on a bcache device: firmware reads the partition "
                       f"tables of disks, not of bcache devices")
            link = f"{b.name}{'p' if b.name[-1].isdigit() else ''}{p.number or i}"
            if link in names:
                add(names[link], f"name {link!r} is also the link of partition {p.id!r} of "
                                 f"bcache {b.id!r}: give one of them another name")


def _check_boot(layout, add):
    """grub reads the kernel and its configuration from /boot (or /): not through bcache."""
    bl = layout.bootloader
    if not bl or bl.type != "grub2":
        return
    mounts = {fs.mount: fs for fs in layout.filesystems if fs.mount}
    boot = mounts.get("/boot") or mounts.get("/")
    for mount in ("/boot/efi", boot.mount if boot else None):
        fs = mounts.get(mount)
        cached = on_bcache(layout, fs.device) if fs else []
        if cached:
            add(fs, f"{mount} is on bcache {cached[0]!r}: grub and firmware read no bcache, so "
                    f"the machine could not boot; put {mount} on a partition or an array of "
                    f"its own" + (" (a /boot outside bcache, / may stay on it)"
                                  if mount == "/" else ""))
