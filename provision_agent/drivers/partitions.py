"""Partition tables: sgdisk for GPT, parted (+ sfdisk for MBR type bytes) for msdos.

Geometry is decided by the planner (sectors of 512 bytes, inclusive ranges); these functions
only carry it out. Partitions to keep are never deleted or recreated.
"""

import json
import logging

from provision_agent.errors import ImageError
from provision_agent.plan.devnames import partition_number
from provision_agent.plan.parttypes import GPT_TYPES, MBR_TYPES

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


def new_msdos_table(runner, disk, keep=()):
    """Write an empty msdos table, or with keep, delete every partition except those numbers.
    (A GPT is written whole by write_gpt.)"""
    keep = set(keep)
    if not keep:
        runner.run(["parted", "-s", disk, "mklabel", "msdos"])
        return
    table = read_table(runner, disk)
    for number in sorted(set(_numbers(table)) - keep, reverse=True):
        runner.run(["parted", "-s", disk, "rm", str(number)])


def _gpt_options(args):
    n = args["number"]
    options = [f"--new={n}:{args['start']}:{args['end']}", f"--typecode={n}:{args['type']}"]
    if args.get("name"):
        options.append(f"--change-name={n}:{args['name']}")
    if args.get("guid"):
        options.append(f"--partition-guid={n}:{args['guid']}")
    if "boot" in args.get("flags", []):
        options.append(f"--attributes={n}:set:{GPT_LEGACY_BOOT_BIT}")
    return options


def gpt_argv(args):
    return ["sgdisk", *_gpt_options(args), args["disk"]]


def write_gpt(runner, disk, parts, keep=()):
    """The whole GPT of disk in one sgdisk call: a new empty table (or, with keep, every other
    partition deleted) and then parts, each the args of a partition step.

    One call, not one per partition: every sgdisk that writes syncs and then sleeps a second
    before asking the kernel to re-read the table (gdisk's DiskSync), so a disk of five
    partitions cost six seconds of sleeping, on real hardware as in the VM. sgdisk applies the
    options in order in memory and writes the table once, or not at all when one fails.
    """
    keep = set(keep)
    if keep:
        table = read_table(runner, disk)
        first = [f"--delete={n}" for n in sorted(set(_numbers(table)) - keep, reverse=True)]
    else:
        first = ["--clear"]
    options = [o for args in parts for o in _gpt_options(args)]
    if keep and not first and not options:
        return
    runner.run(["sgdisk", *first, *options, disk])


def msdos_script(parts):
    """sfdisk's input for a new msdos table holding parts (partition step args, the extended
    container among them): each line names its partition, so the numbers are the plan's."""
    lines = ["label: dos", "unit: sectors", ""]
    for args in parts:
        fields = [f"start={args['start']}", f"size={args['end'] - args['start'] + 1}",
                  f"type={args['type'].removeprefix('0x')}"]
        if "boot" in args.get("flags", []):
            fields.append("bootable")
        lines.append(f"{args['device']} : {', '.join(fields)}")
    return "\n".join(lines) + "\n"


def write_msdos(runner, disk, parts):
    """A new msdos table with all of parts in one sfdisk call (parted and sfdisk --part-type
    each cost 0.65 s a call in the VM: 15 calls for six partitions)."""
    runner.run(["sfdisk", "--quiet", disk], input=msdos_script(parts), log_input=True)


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


EXTENDED = ("5", "f", "85")     # msdos extended partition types


def append_at_end(runner, disk, size_bytes, disk_bytes, name=None):
    """Add a Linux partition of size_bytes in the free space at the end of disk, behind the
    partitions a whole-disk image brought (where Ironic puts a configdrive). Returns its number
    and the table the kernel should now show, {number: (start, size)} in 512-byte sectors
    (udev.reread_partitions skips partprobe when it already does).

    An image made for a smaller disk (qcow2 ones too) ends its GPT mid-disk: sgdisk -e moves
    the backup header to the disk's end, in the same call as the new partition, as each sgdisk
    that writes sleeps a second (write_gpt). gdisk then puts the last usable sector at the
    disk's size less the first usable LBA; the partition is started from that and ended where
    sgdisk ends the free space, and the table read back is what is reported."""
    table = read_table(runner, disk)
    if not table or not table.get("partitions"):
        raise ImageError(f"{disk}: the whole-disk image brought no partition table to add a "
                         f"partition to")
    sector = table.get("sectorsize", 512)
    parts = table["partitions"]
    used_end = max(p["start"] + p["size"] - 1 for p in parts)
    gpt = table["label"] == "gpt"
    last = disk_bytes // sector - (table["firstlba"] if gpt else 1)
    align = (1 << 20) // sector
    start = (last + 1 - size_bytes // sector) // align * align
    if start <= used_end:
        raise ImageError(f"{disk}: no room for a {size_bytes >> 20} MiB partition after the "
                         f"image's partitions (they end at sector {used_end}, the disk's usable "
                         f"space at {last})")
    number = _next_number(disk, table, gpt)
    args = {"disk": disk, "number": number, "start": start, "end": last, "kind": "primary",
            "name": name, "type": GPT_TYPES["linux"] if gpt else MBR_TYPES["linux"]}
    if gpt:
        runner.run(["sgdisk", "-e", *_gpt_options(dict(args, end=0)), disk])
        table = read_table(runner, disk)
        new = [p for p in table["partitions"] if partition_number(p["node"]) == number]
        if not new or new[0]["start"] != start:
            raise ImageError(f"{disk}: sgdisk did not put partition {number} at sector {start}")
        last = new[0]["start"] + new[0]["size"] - 1
        if last - start + 1 < size_bytes // sector:
            LOG.warning("%s: partition %d has %d sectors, less than the %d asked for", disk,
                        number, last - start + 1, size_bytes // sector)
        parts = table["partitions"]
    else:
        create(runner, args, "msdos")
    LOG.info("%s: added partition %d (sectors %d-%d) after the image's partitions", disk,
             number, start, last)
    k = sector // 512       # sysfs counts 512-byte sectors
    view = {partition_number(p["node"]): (p["start"] * k, p["size"] * k) for p in parts}
    view[number] = (start * k, (last - start + 1) * k)
    return number, view


def _next_number(disk, table, gpt):
    numbers = _numbers(table)
    if gpt:
        return max(numbers) + 1
    primaries = [n for n in numbers if n <= 4]
    if len(primaries) == 4 or any(p.get("type") in EXTENDED for p in table["partitions"]):
        raise ImageError(f"{disk}: the image's msdos table has no primary slot left at its end "
                         f"for a new partition")
    return max(primaries) + 1
