"""Where bcache goes in a plan: each bcache device is made after the arrays (a backing or
cache device may be one) and before encryption and LVM (which may stand on it); the first
bcache device of a cache set makes the set. The check that the installed system can assemble
them at boot goes with fstab."""

from provision_agent.plan import blocks, validate_bcache
from provision_agent.plan import steps as st


def devices(res, table):
    """Each bcache device made, then its partitions (table(b): the steps of its table, its
    partitions and the wait for them, as an array's)."""
    layout, dev, steps, made = res.layout, res.devices.get, [], set()
    for b in layout.bcache:
        first = b.cache is not None and b.cache not in made
        made.add(b.cache)
        block = blocks.bcache_block(layout, res.blocks, b) or 512
        cache = (f", cached by {dev(b.cache)} in {b.cache_mode} mode"
                 + (" (a new cache set)" if first else " (its cache set, made above)")
                 if b.cache else " without a cache")
        steps.append(st.BcacheCreate(
            dev(b.id), b.name, dev(b.backing), dev(b.cache) if b.cache else None,
            b.cache_mode if b.cache else "none", block, first,
            description=f"bcache {dev(b.id)} on {dev(b.backing)}{cache}"))
        steps += table(b)
    return steps


def boot_check(res):
    """The bcache devices the installed system's fstab (or swap) needs at boot, checked in
    the image: [] when nothing it mounts is on bcache."""
    layout = res.layout
    needed = [b for fs in layout.filesystems if fs.mount or fs.type == "swap"
              for b in validate_bcache.on_bcache(layout, fs.device)]
    needed = [res.devices.get(b) for b in dict.fromkeys(needed)]
    if not needed:
        return []
    return [st.BcacheBoot(needed, description=f"check that the image assembles "
                                              f"{', '.join(needed)} at boot (bcache-tools)")]
