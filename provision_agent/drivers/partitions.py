"""Partition tables: sgdisk for GPT, parted (+ sfdisk for MBR type bytes) for msdos.

Geometry is decided by the planner (sectors of 512 bytes, inclusive ranges); these functions
only carry it out. Partitions to keep are never deleted or recreated.
"""

import json
import logging

from provision_agent.devnames import partition_number

LOG = logging.getLogger(__name__)

# GPT attribute bit 2: "legacy BIOS bootable", what the msdos boot flag means on GPT.
GPT_LEGACY_BOOT_BIT = 2


def read_table(runner, disk):
    """The disk's current table as sfdisk reports it, or None when there is none."""
    res = runner.run(["sfdisk", "--json", disk], check=False)
    if res.returncode != 0 or not res.stdout.strip():
        return None
    return json.loads(res.stdout)["partitiontable"]


def _numbers(table):
    return [partition_number(p["node"]) for p in (table or {}).get("partitions", [])]


def new_table(runner, disk, label, keep=()):
    """Write an empty table, or with keep, delete every partition except those numbers."""
    keep = set(keep)
    if not keep:
        if label == "gpt":
            runner.run(["sgdisk", "--clear", disk])
        else:
            runner.run(["parted", "-s", disk, "mklabel", "msdos"])
        return
    table = read_table(runner, disk)
    for number in sorted(set(_numbers(table)) - keep, reverse=True):
        if label == "gpt":
            runner.run(["sgdisk", f"--delete={number}", disk])
        else:
            runner.run(["parted", "-s", disk, "rm", str(number)])


def gpt_argv(args):
    n = args["number"]
    argv = ["sgdisk", f"--new={n}:{args['start']}:{args['end']}",
            f"--typecode={n}:{args['type']}"]
    if args.get("name"):
        argv.append(f"--change-name={n}:{args['name']}")
    if args.get("guid"):
        argv.append(f"--partition-guid={n}:{args['guid']}")
    if "boot" in args.get("flags", []):
        argv.append(f"--attributes={n}:set:{GPT_LEGACY_BOOT_BIT}")
    return argv + [args["disk"]]


def msdos_argvs(args):
    disk, n = args["disk"], args["number"]
    argvs = [["parted", "-s", "-a", "none", disk, "unit", "s", "mkpart", args["kind"],
              f"{args['start']}s", f"{args['end']}s"]]
    if args["kind"] != "extended":
        argvs.append(["sfdisk", "--part-type", disk, str(n), args["type"].removeprefix("0x")])
    if "boot" in args.get("flags", []):
        argvs.append(["parted", "-s", disk, "set", str(n), "boot", "on"])
    return argvs


def create(runner, args, label):
    argvs = [gpt_argv(args)] if label == "gpt" else msdos_argvs(args)
    for argv in argvs:
        runner.run(argv)


def check_kept(table, args):
    """Problem text if the kept partition args['number'] is not where the plan says, else None."""
    n = args["number"]
    for p in (table or {}).get("partitions", []):
        if partition_number(p["node"]) != n:
            continue
        start, end = p["start"], p["start"] + p["size"] - 1
        if (start, end) != (args["start"], args["end"]):
            return (f"partition {n} to keep is at sectors {start}-{end}, the layout puts it at "
                    f"{args['start']}-{args['end']}")
        return None
    return f"partition {n} to keep does not exist"
