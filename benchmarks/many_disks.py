"""How discovery, udev settle and md creation grow with the disk count (VM bench; a benchmark,
not a test).

For each count (3, 6, 12, 24 by default): one VM with that many 1 GiB sparse SCSI disks on one
virtio-scsi HBA (a JBOD's shape); `provision inventory` once, then a layout that names every
disk: one GPT partition each, RAID10 over all of them, LVM on the array, one XFS volume. The
numbers come from provision's own log and events (the guest's clock), not from the host:

  - discovery: the seconds `discover_disks` logs ("discovered N disks in X s"), in the
    inventory run and in the provision run; and the inventory process, start to exit;
  - udev settle: every `udevadm settle` provision ran (the runner's "exit ... after X s"
    lines), their count and sum, and the longest;
  - md creation: the md_create step (events: `mdadm --create`, the settle after it and the
    wait for /dev/md/NAME) and `mdadm --create` alone (log);
  - the table steps (wipe, partition_table, partition settle) and the whole run;
  - boot to SSH (the host's clock: the ramdisk's init settles udev once for every disk), and
    whether init's own `udevadm settle --timeout=60` gave up ("Timed out for waiting the udev
    queue being empty" on the console).

    PYTHONPATH=$PWD /work/main/.tox/e2e/bin/python -m benchmarks.many_disks [3 6 12 24]

Prints one row per count and the ratios against the first.
"""

import json
import re
import sys

from tests.vmbench import VM
from tests.vmbench.vm import scsi_wwn

DISCOVERED = re.compile(r" DEBUG provision_agent\.drivers\.discovery: discovered (\d+) disks "
                        r"in ([0-9.]+)s")
RUN = re.compile(r" INFO provision_agent\.run\.runner: run: (\S+)(?: (\S+))?")
EXIT = re.compile(r" DEBUG provision_agent\.run\.runner: exit -?\d+ after ([0-9.]+)s: ")
SETTLE_TIMEOUT = "Timed out for waiting the udev queue being empty"
COLUMNS = ("boot to SSH", "inventory process", "discovery (inventory)", "discovery (provision)",
           "settle count", "settle sum", "settle max", "wipe steps", "table steps",
           "partition settle", "mdadm --create", "md_create step", "provision total")


def layout(count):
    # by WWN: a SCSI disk's inventory serial is its NAA id, as ironic-python-agent reports it
    names = [f"d{i:02d}" for i in range(count)]
    return {
        "version": 1,
        "disks": [{"id": f"disk{i:02d}", "match": {"wwn": scsi_wwn(f"BENCH{i:02d}")},
                   "partitions": [{"id": name, "size": "remaining", "type": "raid"}]}
                  for i, name in enumerate(names)],
        "raids": [{"id": "md-data", "name": "data", "level": 10, "members": names}],
        "volume_groups": [{"id": "vg", "name": "jbod", "pvs": ["md-data"], "logical_volumes": [
            {"id": "lv", "name": "data", "size": "remaining"}]}],
        "filesystems": [{"device": "lv", "type": "xfs", "mount": "/", "label": "data"}],
    }


def tool_seconds(log):
    """[(program and first argument, seconds)] of every command the runner logged."""
    out, command = [], ()
    for line in log.splitlines():
        r = RUN.search(line)
        if r:
            command = r.groups()
        e = EXIT.search(line)
        if e:
            out.append((command, float(e.group(1))))
    return out


def discovery_seconds(log):
    m = DISCOVERED.search(log)
    return (int(m.group(1)), float(m.group(2))) if m else (None, None)


def step_seconds(events):
    """{kind: [seconds of each step of that kind]} from the events file's "done" lines."""
    out = {}
    for line in events.splitlines():
        e = json.loads(line)
        if e.get("event") == "step" and e.get("status") == "done":
            out.setdefault(e["kind"], []).append(e["seconds"])
    return out


def measure(count):
    serials = [f"BENCH{i:02d}" for i in range(count)]
    with VM(disks=count, disk_size="1G", bus="scsi", serials=serials,
            name=f"many-disks-{count}") as vm:
        row = {"boot to SSH": vm.boot_seconds,
               "init settle gave up": SETTLE_TIMEOUT in vm.console_text()}
        inv = vm.provision(None, ["--debug"], subcommand="inventory", clock=True)
        assert inv.returncode == 0, inv.stderr
        listed = len(json.loads(inv.stdout)["inventory"]["disks"])
        assert listed == count, f"{listed} disks listed of {count}"
        row["inventory process"] = inv.clock[1] - inv.clock[0]
        row["discovery (inventory)"] = discovery_seconds(inv.log)[1]
        events = "/tmp/vmbench/events.jsonl"
        run = vm.provision(layout(count), ["--debug", "--events_file", events], clock=True)
        assert run.returncode == 0, run.log[-3000:]
        steps = step_seconds(vm.ssh(["cat", events]).stdout)
    tools = tool_seconds(run.log)
    settles = [s for cmd, s in tools if cmd == ("udevadm", "settle")]
    row.update({
        "discovery (provision)": discovery_seconds(run.log)[1],
        "settle count": len(settles), "settle sum": sum(settles), "settle max": max(settles),
        "wipe steps": sum(steps.get("wipe", [])),
        "table steps": sum(steps.get("partition_table", [])),
        "partition settle": sum(steps.get("settle", [])),
        "mdadm --create": sum(s for cmd, s in tools if cmd == ("mdadm", "--create")),
        "md_create step": sum(steps.get("md_create", [])),
        "provision total": run.clock[1] - run.clock[0],
    })
    return row


def table(rows):
    base = rows[0][1]
    head = f"{'':<24}" + "".join(f"{n:>9} disks" for n, _ in rows)
    lines = [head]
    for col in COLUMNS:
        cells = []
        for _, row in rows:
            value = row.get(col)
            if value is None:
                cells.append(f"{'-':>15}")
                continue
            ratio = f" ({value / base[col]:.1f}x)" if base.get(col) else ""
            number = f"{value:d}" if isinstance(value, int) else f"{value:.2f}"
            cells.append(f"{number + ratio:>15}")
        lines.append(f"{col:<24}" + "".join(cells))
    lines.append(f"{'init settle gave up':<24}"
                 + "".join(f"{str(row['init settle gave up']):>15}" for _, row in rows))
    return "\n".join(lines)


def main(argv):
    counts = [int(a) for a in argv] or [3, 6, 12, 24]
    rows = []
    for count in counts:
        rows.append((count, measure(count)))
        print(json.dumps({"disks": count, **rows[-1][1]}), flush=True)
    print("\nseconds on the guest's clock (boot to SSH: the host's), ratio to the first count:")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
