"""How much does provision cost over the bare commands? (VM bench; a benchmark, not a test.)

For each sample layout, in one VM with blank disks: run `provision` and time it; blank the disks
again; replay the exact external commands provision ran (taken from its log, in order) as a plain
`sh -e` script and time that. Both start from the same blank disks, so the difference is what
provision adds: Python start-up, planning, discovery, settling and waiting for devices.

    python3 -m benchmarks.layouts_vs_shell [sample.json ...]
"""

import json
import re
import shlex
import sys
import time
from pathlib import Path

from benchmarks import layout_phases
from tests.vmbench import VM

REPO = Path(__file__).resolve().parents[1]
DEFAULT = ["single-disk.json", "two-disk-raid-lvm.json", "three-disk-raid5-raid0-striped.json",
           "msdos-logical.json"]
RUN_LINE = re.compile(r" INFO provision_agent\.run\.runner: run: (.*)$")
# Truly blank disks for both sides: old md payloads (a PV label inside an array, say) would
# come back to life when the same geometry is recreated and change what each side has to do.
# The virtio disks unmap a punched hole, so zeroing all of them takes well under a second.
BLANK = ("umount -R /tmp/provision-target >/dev/null 2>&1; vgchange -an >/dev/null 2>&1; "
         "for m in /dev/md[0-9]*; do [ -b $m ] && mdadm --stop $m >/dev/null 2>&1; done; "
         "for d in /dev/vda /dev/vdb /dev/vdc; do "
         "fallocate --punch-hole --offset 0 --length $(blockdev --getsize64 $d) $d; "
         "blockdev --rereadpt $d; done; udevadm settle; sync")


EXIT_LINE = re.compile(r" DEBUG provision_agent\.run\.runner: exit (\d+) after ")
STDIN_LINE = re.compile(r" DEBUG provision_agent\.run\.runner: stdin of \S+: (\".*\")$")


AT_ONCE = re.compile(r" INFO provision_agent\.run\.executor: step \d+/\d+: .* at once\)$")


def script_of(log, at_once=False):
    """The commands of a --debug provision log as a `sh -e` script; a command that exited
    non-zero for provision too (a probe finding nothing, say) gets `|| true`, and one that
    was fed a script (sfdisk's) gets it as a here-document. Steps that provision ran at once
    (several disks' tables) run one after the other, as a plain script would, or with
    at_once in the background, waited for before the next step."""
    cmds, started, group = [], False, None
    for line in log.splitlines():
        if "provision_agent.run.executor: step " in line:
            started = True
            if at_once and AT_ONCE.search(line):
                group = group if group is not None else len(cmds)
            elif group is not None:
                cmds.append(["wait", 0, None, False])
                group = None
        m = RUN_LINE.search(line)
        if m and started:      # before the first step: releasing an earlier run's mounts
            # argv was logged space-joined; our layouts have no argument with a space in it
            argv = m.group(1).removesuffix(" < stdin").split(" ")
            if argv[0] == "mount":     # provision creates mount points in Python
                cmds.append([f"mkdir -p {shlex.quote(argv[-1])}", 0, None, False])
            cmds.append([" ".join(shlex.quote(a) for a in argv), 0, None, group is not None])
            continue
        m = STDIN_LINE.search(line)
        if m and cmds:
            cmds[-1][2] = json.loads(m.group(1))
            continue
        m = EXIT_LINE.search(line)
        if m and cmds:
            cmds[-1][1] = int(m.group(1))
    if group is not None:
        cmds.append(["wait", 0, None, False])
    lines, pids = ["set -e", "mkdir -p /tmp/provision-target"], []
    for cmd, rc, stdin, background in cmds:
        if cmd == "wait":
            # `wait PID` returns the job's status, which set -e then acts on
            lines += [f"wait {pid}" for pid in pids]
            pids = []
            continue
        line = cmd + (" || true" if rc else "")
        if stdin is not None:
            line = f"{line} <<'STDIN'\n{stdin.rstrip()}\nSTDIN"
        if background:
            line = f"{{ {line}\n}} &\np{len(pids)}=$!" if stdin is not None else \
                f"{line} &\np{len(pids)}=$!"
            pids.append(f"$p{len(pids)}")
        lines.append(line)
    return "\n".join(lines) + "\n"


def replay(vm, script):
    """Run script on blank disks: (guest seconds, host seconds, status)."""
    vm.write_text("/tmp/replay.sh", script)
    vm.ssh(BLANK, timeout=600)
    t0 = time.monotonic()
    res = vm.ssh(["sh", "-c", "date +%s.%N; sh -e /tmp/replay.sh >/tmp/replay.out 2>&1; "
                              "rc=$?; date +%s.%N; exit $rc"], check=False, timeout=1800)
    host = time.monotonic() - t0
    begin, end = map(float, res.stdout.split()[:2])
    status = "ok" if res.returncode == 0 else (
        f"replay exit {res.returncode}: "
        + vm.ssh("tail -3 /tmp/replay.out", check=False).stdout.strip())
    return end - begin, host, status


def main(argv):
    samples = argv or DEFAULT
    rows, phases = [], []
    with VM(disks=3, disk_size="4G", serials=["disk0", "disk1", "disk2"],
            name="layouts-vs-shell") as vm:
        for name in samples:
            vm.ssh(BLANK, timeout=600)
            t0 = time.monotonic()
            run = vm.provision(REPO / "samples" / name, ["--debug"], clock=True)
            ours = time.monotonic() - t0
            if run.returncode != 0:
                print(f"{name}: provision exited {run.returncode}\n{run.stderr}")
                return 1
            started, ended = run.clock
            phases.append((name, layout_phases.breakdown(run.log, started, ended)))
            script = script_of(run.log)
            shell, shell_host, status = replay(vm, script)
            together = script_of(run.log, at_once=True)
            if together != script:
                at_once, _, status_at_once = replay(vm, together)
                status += "" if status_at_once == "ok" else f"; at once: {status_at_once}"
            else:
                at_once = shell
            rows.append((name, ended - started, shell, at_once, ours, shell_host,
                         script.count("\n") - 2, status))
            phases[-1] += (shell,)
    print(f"\n{'layout':<40} {'provision s':>11} {'shell s':>8} {'ratio':>6} "
          f"{'at once s':>9} {'ratio':>6} "
          f"{'(host: provision':>16} {'shell':>6} {'ratio)':>6} commands")
    for name, ours, shell, at_once, ours_host, shell_host, n, status in rows:
        print(f"{name:<40} {ours:>11.1f} {shell:>8.1f} {ours / shell:>6.2f} "
              f"{at_once:>9.1f} {ours / at_once:>6.2f} "
              f"{ours_host:>16.1f} {shell_host:>6.1f} {ours_host / shell_host:>6.2f} {n} {status}")
    print("(same VM, same blank disks; ratio = provision / shell; the shell side skips "
          "discovery, validation and planning and runs the commands one after the other; "
          "'at once' runs the commands of the steps provision ran at once (several disks' "
          "tables) in the background, as provision does. Timed by the guest's clock around each "
          "process; the host columns time the SSH calls as well: provision's side makes four "
          "more, for its input, log and clock files, about 0.7 s each)")
    print("\nwhere provision's seconds go (guest clock; see benchmarks/layout_phases.py):")
    print(layout_phases.table(phases))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
