"""Resolution of bcache devices (resolve.py): their device names, sizes and partitions."""

from provision_agent.plan.devnames import bcache_device
from provision_agent.plan.validate_bcache import below

# make-bcache's default data offset on a backing device: its superblock and nothing else
DATA_OFFSET = 8 * 1024


def size_and_place(layout, res, problems, place):
    """Each bcache device by its label, as large as its backing device less the superblock;
    its partitions placed (place: resolve's placement of a disk's partitions) as on a disk of
    that size and of the largest block sizes of the disks under its cache set, which
    make-bcache is given."""
    for b in layout.bcache:
        res.devices[b.id] = bcache_device(b.name)
        if b.backing in res.sizes:
            res.sizes[b.id] = max(0, res.sizes[b.backing] - DATA_OFFSET)
    under = below(layout)
    for b in (b for b in layout.bcache if b.partitions and b.id in res.sizes):
        sizes = [res.block_sizes[d] for d in _disks(layout, under, res, b)]
        res.block_sizes[b.id] = (max(s[0] for s in sizes), max(s[1] for s in sizes),
                                 all(s[2] for s in sizes))
        res.partition_bases[b.id] = res.devices[b.id]
        place(b, {"name": res.devices[b.id], "size": res.sizes[b.id]}, res, problems)


def _disks(layout, under, res, b):
    """The disks under b's cache set: its cache and every backing device it caches."""
    todo = [b.backing] + ([b.cache] + [o.backing for o in layout.bcache if o.cache == b.cache]
                          if b.cache else [])
    found = set()
    while todo:
        ref = todo.pop()
        if ref in res.block_sizes:
            found.add(ref)
        else:
            todo += under.get(ref, [])
    return found
