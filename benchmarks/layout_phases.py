"""Where a provision run's time goes, from its --debug log.

Phases: start-up (interpreter and imports, before the first log line), preparation (input,
discovery, validation, planning, preflight: first log line to step 1), then within the steps
the external tools (the seconds when at least one ran: tables of several disks are written at
once), `udevadm settle`, and what is left: provision's own Python, including the
sleeps of its waits for devices; last, what follows the last step (report, exit).
The shell replay of benchmarks/layouts_vs_shell.py spends only the tools' share.
"""

import re
from datetime import datetime

STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
STEP = re.compile(r" INFO provision_agent\.run\.executor: step 1/\d+: ")
RUN = re.compile(r" INFO provision_agent\.run\.runner: run: (\S+)(?: (\S+))?")
# the exit line names only the program; which command it was comes from the run line before
EXIT = re.compile(r" DEBUG provision_agent\.run\.runner: exit -?\d+ after ([0-9.]+)s: ")

PHASES = ("start-up", "preparation", "tools", "udev settle", "python in steps", "after steps")


def _seconds(stamp):
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def breakdown(log, started, ended):
    """{phase: seconds} for one run: started/ended are the guest clock around the process
    (epoch seconds); the log's own timestamps place everything between."""
    stamps, first_step, tools, settle, command = [], None, [], 0.0, ()
    for line in log.splitlines():
        m = STAMP.match(line)
        if not m:
            continue            # a continuation line (a traceback, the plan's text)
        t = _seconds(m.group(1))
        stamps.append(t)
        if first_step is None and STEP.search(line):
            first_step = t
        r = RUN.search(line)
        if r:
            command = r.groups()
        e = EXIT.search(line)
        if e and first_step is not None:
            took = float(e.group(1))
            if command == ("udevadm", "settle"):
                settle += took
            else:
                tools.append((t - took, t))
    if not stamps:
        return {"start-up": ended - started}
    first, last = stamps[0], stamps[-1]
    first_step = first_step if first_step is not None else last
    in_steps = last - first_step
    tools = _covered(tools)
    return {"start-up": max(0.0, first - started),
            "preparation": first_step - first,
            "tools": tools,
            "udev settle": settle,
            "python in steps": max(0.0, in_steps - tools - settle),
            "after steps": max(0.0, ended - last)}


def _covered(intervals):
    """Seconds during which at least one of the (start, end) intervals ran: tables of several
    disks are written at once, and their tools' seconds must not count twice."""
    total, reach = 0.0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def table(rows):
    """rows: [(layout name, {phase: s}, shell replay s)] -> printable text."""
    head = f"{'layout':<36}" + "".join(f"{p:>16}" for p in PHASES) + f"{'total':>9}{'replay':>9}"
    out = [head]
    for name, phases, shell in rows:
        total = sum(phases.get(p, 0.0) for p in PHASES)
        out.append(f"{name:<36}" + "".join(f"{phases.get(p, 0.0):>16.1f}" for p in PHASES)
                   + f"{total:>9.1f}{shell:>9.1f}")
    return "\n".join(out)
