"""Partition tables: sgdisk for GPT, parted (+ sfdisk for MBR type bytes) for msdos.

Geometry is decided by the planner, in bytes; these functions only carry it out, in the
disk's own logical sectors (a step's `sector_size`, which must be the disk's), since sgdisk,
sfdisk and parted count in those. Partitions to keep are never deleted or recreated.
"""

import json
import logging
import os
import stat

from provision_agent.errors import ImageError, MachineMismatch, Problem
from provision_agent.plan.devnames import partition_number
from provision_agent.plan.parttypes import GPT_TYPES, MBR_TYPES

LOG = logging.getLogger(__name__)

# GPT attribute bit 2: "legacy BIOS bootable", what the msdos boot flag means on GPT.
GPT_LEGACY_BOOT_BIT = 2


def logical_sector_size(disk, sys_block="/sys/class/block"):
    """The logical block size the kernel gives disk, 512 for an image file (which the tools
    address in 512-byte sectors), None when neither says."""
    try:
        with open(os.path.join(sys_block, os.path.basename(os.path.realpath(disk)), "queue",
                               "logical_block_size")) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        pass
    try:
        return 512 if stat.S_ISREG(os.stat(disk).st_mode) else None
    except OSError:
        return None


def check_sector_size(disk, parts, sys_block="/sys/class/block"):
    """Refuse, before anything is written, a table planned for other sectors than the disk's
    (a plan made against an inventory of another machine, or of this one before its disks
    were reformatted): its offsets would land elsewhere or not on sector boundaries."""
    have = logical_sector_size(disk, sys_block)
    for args in parts:
        if have is not None and args["sector_size"] != have:
            raise MachineMismatch([Problem(disk, f"the plan writes partition {args['number']} "
                                                 f"in {args['sector_size']}-byte sectors, the "
                                                 f"disk's logical sectors are {have} bytes: plan "
                                                 f"again against this machine's inventory")])


def sectors(args):
    """(first, last) logical sector of a partition step, inclusive, from its bytes."""
    sector, offset, size = args["sector_size"], args["offset"], args["size"]
    if offset % sector or size % sector or size <= 0:
        raise MachineMismatch([Problem(args["disk"], f"partition {args['number']} at byte "
                                                     f"{offset}, {size} bytes long, is not in "
                                                     f"whole {sector}-byte sectors")])
    return offset // sector, (offset + size) // sector - 1


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
    # a plan's step gives bytes; append_at_end gives sectors it read from the disk's table
    start, end = sectors(args) if "offset" in args else (args["start"], args["end"])
    options = [f"--new={n}:{start}:{end}", f"--typecode={n}:{args['type']}"]
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
    check_sector_size(disk, parts)
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
        start, end = sectors(args)
        fields = [f"start={start}", f"size={end - start + 1}",
                  f"type={args['type'].removeprefix('0x')}"]
        if "boot" in args.get("flags", []):
            fields.append("bootable")
        lines.append(f"{args['device']} : {', '.join(fields)}")
    return "\n".join(lines) + "\n"


def write_msdos(runner, disk, parts):
    """A new msdos table with all of parts in one sfdisk call (parted and sfdisk --part-type
    each cost 0.65 s a call in the VM: 15 calls for six partitions)."""
    check_sector_size(disk, parts)
    runner.run(["sfdisk", "--quiet", disk], input=msdos_script(parts), log_input=True)


def msdos_argvs(args):
    disk, n = args["disk"], args["number"]
    start, end = sectors(args)
    argvs = [["parted", "-s", "-a", "none", disk, "unit", "s", "mkpart", args["kind"],
              f"{start}s", f"{end}s"]]
    if args["kind"] != "extended":
        argvs.append(["sfdisk", "--part-type", disk, str(n), args["type"].removeprefix("0x")])
    if "boot" in args.get("flags", []):
        argvs.append(["parted", "-s", disk, "set", str(n), "boot", "on"])
    return argvs


def create(runner, args, label):
    check_sector_size(args["disk"], [args])
    argvs = [gpt_argv(args)] if label == "gpt" else msdos_argvs(args)
    for argv in argvs:
        runner.run(argv)


def check_kept(table, args):
    """Problem text if the kept partition args['number'] is not where the plan says, else None."""
    n = args["number"]
    sector = (table or {}).get("sectorsize", 512)
    for p in (table or {}).get("partitions", []):
        if partition_number(p["node"]) != n:
            continue
        offset, size = p["start"] * sector, p["size"] * sector
        if (offset, size) != (args["offset"], args["size"]):
            return (f"partition {n} to keep is at bytes {offset}-{offset + size - 1} "
                    f"({sector}-byte sectors {p['start']}-{p['start'] + p['size'] - 1}), the "
                    f"layout puts it at bytes {args['offset']}-"
                    f"{args['offset'] + args['size'] - 1}")
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
        create(runner, dict(args, offset=start * sector, size=(last - start + 1) * sector,
                            sector_size=sector), "msdos")
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
