"""The steps of what a layout keeps in place but not as it is: kept arrays assembled, and the
contents of partitions and arrays given `wipe` cleared before anything is made on them.

A kept partition or array without `wipe` needs no step of its own here: the table is edited
around it (planner.py), its volume group activated, its filesystem mounted as it is.
"""

from provision_agent.plan import steps as st


def partition_wipes(res):
    """After the partitions settle: a kept partition's contents cleared as `wipe` says (a new
    one is cleared of signatures by the settle step already; `zero` zeroes it all)."""
    out = []
    for disk in res.layout.disks:
        for part in disk.partitions:
            if part.wipe and part.id in res.devices and (part.keep or part.wipe == "zero"):
                out.append(_wipe(res.devices[part.id], part.wipe, part.keep))
    return out


def array(res, r):
    """The steps of one array: made, or assembled as it is when kept; then its wipe."""
    dev = res.devices.get
    if r.keep:
        steps = [st.MdAssemble(dev(r.id), r.name, r.level, [dev(m) for m in r.members],
                               [dev(s) for s in r.spares], r.on_member_failure,
                               description=f"keep RAID{r.level} {dev(r.id)}: assemble it from "
                                           f"{', '.join(dev(m) for m in r.members)}")]
    else:
        steps = [st.MdCreate(dev(r.id), r.name, r.level, [dev(m) for m in r.members],
                             [dev(s) for s in r.spares], r.metadata, r.chunk_kib,
                             r.on_member_failure,
                             description=f"RAID{r.level} {dev(r.id)} over {len(r.members)} "
                                         f"members")]
    if r.wipe and (r.keep or r.wipe == "zero"):
        steps.append(_wipe(dev(r.id), r.wipe, r.keep))
    return steps


def array_table(res, r, partition_step, table_text):
    """An array's partition table, its partitions and the wait for them, as a disk's
    (planner.py lends its builders): written whole on a new or wiped array, edited around
    the kept partitions of a kept one."""
    placed = res.placed.get(r.id, [])
    if not placed:
        return []
    name = res.devices[r.id]
    steps = [st.PartitionTable(name, r.table, description=table_text(res.layout, res, r))]
    steps += [partition_step(res.layout, r, name, p, res.block_sizes[r.id][0]) for p in placed]
    steps.append(st.Settle([name], [p.device for p in placed if p.kind != "extended"],
                           description=f"re-read {name}'s partition table and wait for its "
                                       f"partition devices"))
    return steps + [_wipe(res.devices[p.id], p.wipe, p.keep) for p in r.partitions
                    if p.wipe and (p.keep or p.wipe == "zero")]


def _wipe(device, how, kept):
    what = ("clear every signature and the first and last MiB" if how == "superblock"
            else "zero every byte")
    return st.WipeContents(device, how, description=f"wipe {device}"
                           + (" (kept in place, its contents given up)" if kept else "")
                           + f": {what}")
