"""The last check before the first write: does the live machine still match the plan?

A plan may have been made from a recorded inventory, or the machine may have changed since.
Everything here only reads. Problems exit 3 (MachineMismatch) with nothing written.
"""

import logging
import os

from provision_agent.drivers import blockinfo, partitions
from provision_agent.errors import MachineMismatch, Problem

LOG = logging.getLogger(__name__)


def _where(layout, disk_id):
    for disk in layout.disks:
        if disk.id == disk_id:
            return disk.origin or f"disk {disk_id}"
    return f"disk {disk_id}"


def _in_use(runner, disk, mounted, swaps):
    """Why disk must not be written to (something on it is mounted or swapping), or []."""
    paths = {disk} | {n["path"] for n in blockinfo.descendants(blockinfo.tree(runner, disk))}
    real = {os.path.realpath(p) for p in paths}
    reasons = []
    for source, where in mounted.items():
        if source in paths or os.path.realpath(source) in real:
            reasons.append(f"{source} is mounted at {where}")
    for swap in swaps:
        if swap in paths or os.path.realpath(swap) in real:
            reasons.append(f"{swap} is in use as swap")
    return reasons


def check(planned, live_disks, runner, mounted=None, swaps=None):
    res = planned.resolved
    mounted = blockinfo.mounted_sources() if mounted is None else mounted
    swaps = blockinfo.active_swaps() if swaps is None else swaps
    live = {d["name"]: d for d in live_disks}
    problems = []
    for disk_id, want in res.disks.items():
        where, name = _where(res.layout, disk_id), want["name"]
        have = live.get(name)
        if have is None:
            problems.append(Problem(where, f"{name} is not present on this machine"))
            continue
        if have["size"] < want["size"]:
            problems.append(Problem(where, f"{name} has {have['size']} bytes, the plan was made "
                                           f"for {want['size']}"))
        if want.get("serial") and have.get("serial") and want["serial"] != have["serial"]:
            problems.append(Problem(where, f"{name} has serial {have['serial']}, the plan was "
                                           f"made for serial {want['serial']}"))
        if have.get("read_only"):
            problems.append(Problem(where, f"{name} is read-only"))
        for reason in _in_use(runner, name, mounted, swaps):
            problems.append(Problem(where, f"{name} is in use: {reason}"))
    problems += _kept_partitions(planned.steps, runner)
    if problems:
        raise MachineMismatch(problems)
    LOG.info("preflight: %d disk(s) present, large enough and not in use", len(res.disks))


def _kept_partitions(steps, runner):
    problems, tables = [], {}
    for step in steps:
        if step.kind != "partition" or not step.args.get("keep"):
            continue
        disk = step.args["disk"]
        if disk not in tables:
            tables[disk] = partitions.read_table(runner, disk)
        msg = partitions.check_kept(tables[disk], step.args)
        if msg:
            problems.append(Problem(disk, msg))
    return problems
