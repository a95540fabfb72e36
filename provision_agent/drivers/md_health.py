"""What md knows of its members' health, read from sysfs, and taking a member out.

md absorbs a member's write error when it can: the sector goes into the member's bad-block
log (`bad_blocks`), the member's `state` gains write_error (and want_replacement), and the
array stays "active sync" with both members listed. Nothing of that reaches the tool that
wrote; this module reads it back (Documentation/admin-guide/md.rst: md/dev-XXX/state, errors,
bad_blocks; md/degraded, sync_action).
"""

import os
import time
from dataclasses import dataclass, field

from provision_agent.errors import CommandError

SYS_BLOCK = "/sys/block"
# a failed member md still holds ("Device or resource busy" from mdadm --remove): asked again
# every REMOVE_TICK seconds for REMOVE_WAIT (seen on 2026-11-29: busy at once after --fail)
REMOVE_WAIT = 30
REMOVE_TICK = 0.5
MAX_READ = 64 * 1024
# member states that mean md met an error on it ("in_sync" and "spare" alone are healthy)
BAD_STATES = ("faulty", "write_error", "blocked", "want_replacement")


@dataclass
class Member:
    name: str                   # kernel name: vdb1
    state: list = field(default_factory=list)
    errors: int = 0             # read errors md corrected without evicting the member
    bad_blocks: list = field(default_factory=list)   # [(first sector, count)]


@dataclass
class ArrayHealth:
    kernel_name: str            # md127
    members: list               # [Member]
    degraded: int = 0
    sync_action: str = ""       # idle | resync | recover | check | ...
    sync_completed: str = ""    # "none" or "done / total" (sectors)


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read(MAX_READ).strip()
    except OSError:
        return ""


def parse_bad_blocks(text):
    """md's bad_blocks: one "SECTOR LENGTH" per line -> [(sector, length)]."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            out.append((int(parts[0]), int(parts[1])))
    return out


def read(device, sys_block=SYS_BLOCK):
    """The health of the md array `device` (/dev/md/NAME or /dev/mdN); None when it is not
    running."""
    kname = os.path.basename(os.path.realpath(device))
    md_dir = os.path.join(sys_block, kname, "md")
    if not os.path.isdir(md_dir):
        return None
    members = []
    for entry in sorted(os.listdir(md_dir)):
        if not entry.startswith("dev-"):
            continue
        path = os.path.join(md_dir, entry)
        errors = _read(os.path.join(path, "errors"))
        members.append(Member(
            entry[4:], [s for s in _read(os.path.join(path, "state")).split(",") if s],
            int(errors) if errors.isdigit() else 0,
            parse_bad_blocks(_read(os.path.join(path, "bad_blocks")))))
    degraded = _read(os.path.join(md_dir, "degraded"))
    return ArrayHealth(kname, members, int(degraded) if degraded.isdigit() else 0,
                       _read(os.path.join(md_dir, "sync_action")),
                       _read(os.path.join(md_dir, "sync_completed")))


def member_problems(health):
    """{member kernel name: what md says is wrong with it}; empty for a healthy array."""
    problems = {}
    for m in health.members:
        said = []
        bad = [s for s in m.state if s in BAD_STATES]
        if bad:
            said.append(f"md state {','.join(m.state)}")
        if m.bad_blocks:
            shown = ", ".join(f"{start}+{length}" for start, length in m.bad_blocks[:4])
            more = f" and {len(m.bad_blocks) - 4} more" if len(m.bad_blocks) > 4 else ""
            said.append(f"{len(m.bad_blocks)} range(s) in its bad-block log "
                        f"(sector+count: {shown}{more})")
        if m.errors:
            said.append(f"{m.errors} read error(s) md corrected")
        if said:
            problems[m.name] = "; ".join(said)
    return problems


def remove_member(runner, array, member, wait=REMOVE_WAIT, sleep=time.sleep,
                  clock=time.monotonic):
    """Mark `member` (a /dev path) failed and take it out of `array`: md stops writing to it,
    the array runs degraded. mdadm refuses when the array would not survive it (the last
    mirror, a third RAID6 member): its error then stands. A member just failed can still be
    busy in md (its writes in flight, its bad blocks not yet recorded in the superblocks):
    the removal is asked again every REMOVE_TICK for `wait` seconds while mdadm says so."""
    runner.run(["mdadm", "--manage", array, "--fail", member])
    deadline = clock() + wait
    while True:
        res = runner.run(["mdadm", "--manage", array, "--remove", member], check=False)
        if res.returncode == 0:
            return
        if "busy" not in res.stderr.lower() or clock() >= deadline:
            raise CommandError(list(res.argv), res.returncode, res.stdout, res.stderr)
        sleep(REMOVE_TICK)
