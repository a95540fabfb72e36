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
RUN_LINE = re.compile(r" INFO provision_agent\.runner: run: (.*)$")
# Truly blank disks for both sides: old md payloads (a PV label inside an array, say) would
# come back to life when the same geometry is recreated and change what each side has to do.
# The virtio disks unmap a punched hole, so zeroing all of them takes well under a second.
BLANK = ("umount -R /tmp/provision-target >/dev/null 2>&1; vgchange -an >/dev/null 2>&1; "
         "for m in /dev/md[0-9]*; do [ -b $m ] && mdadm --stop $m >/dev/null 2>&1; done; "
         "for d in /dev/vda /dev/vdb /dev/vdc; do "
         "fallocate --punch-hole --offset 0 --length $(blockdev --getsize64 $d) $d; "
         "blockdev --rereadpt $d; done; udevadm settle; sync")


EXIT_LINE = re.compile(r" DEBUG provision_agent\.runner: exit (\d+) after ")
STDIN_LINE = re.compile(r" DEBUG provision_agent\.runner: stdin of \S+: (\".*\")$")


def script_of(log):
    """The commands of a --debug provision log as a `sh -e` script; a command that exited
    non-zero for provision too (a probe finding nothing, say) gets `|| true`, and one that
    was fed a script (sfdisk's) gets it as a here-document."""
    cmds, started = [], False
    for line in log.splitlines():
        started = started or "provision_agent.executor: step " in line
        m = RUN_LINE.search(line)
        if m and started:      # before the first step: releasing an earlier run's mounts
            # argv was logged space-joined; our layouts have no argument with a space in it
            argv = m.group(1).removesuffix(" < stdin").split(" ")
            if argv[0] == "mount":     # provision creates mount points in Python
                cmds.append([f"mkdir -p {shlex.quote(argv[-1])}", 0, None])
            cmds.append([" ".join(shlex.quote(a) for a in argv), 0, None])
            continue
        m = STDIN_LINE.search(line)
        if m and cmds:
            cmds[-1][2] = json.loads(m.group(1))
            continue
        m = EXIT_LINE.search(line)
        if m and cmds:
            cmds[-1][1] = int(m.group(1))
    lines = ["set -e", "mkdir -p /tmp/provision-target"]
    for cmd, rc, stdin in cmds:
        line = cmd + (" || true" if rc else "")
        lines.append(line if stdin is None else f"{line} <<'STDIN'\n{stdin.rstrip()}\nSTDIN")
    return "\n".join(lines) + "\n"


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
            vm.write_text("/tmp/replay.sh", script)
            vm.ssh(BLANK, timeout=600)
            t0 = time.monotonic()
            res = vm.ssh(["sh", "-c", "date +%s.%N; sh -e /tmp/replay.sh >/tmp/replay.out 2>&1; "
                                      "rc=$?; date +%s.%N; exit $rc"], check=False, timeout=1800)
            shell_host = time.monotonic() - t0
            begin, end = map(float, res.stdout.split()[:2])
            status = "ok" if res.returncode == 0 else (
                f"replay exit {res.returncode}: "
                + vm.ssh("tail -3 /tmp/replay.out", check=False).stdout.strip())
            rows.append((name, ended - started, end - begin, ours, shell_host,
                         script.count("\n") - 2, status))
            phases[-1] += (end - begin,)
    print(f"\n{'layout':<40} {'provision s':>11} {'shell s':>8} {'ratio':>6} "
          f"{'(host: provision':>16} {'shell':>6} {'ratio)':>6} commands")
    for name, ours, shell, ours_host, shell_host, n, status in rows:
        print(f"{name:<40} {ours:>11.1f} {shell:>8.1f} {ours / shell:>6.2f} "
              f"{ours_host:>16.1f} {shell_host:>6.1f} {ours_host / shell_host:>6.2f} {n} {status}")
    print("(same VM, same blank disks; ratio = provision / shell; the shell side skips "
          "discovery, validation and planning. Timed by the guest's clock around each process; "
          "the host columns time the SSH calls as well: provision's side makes four more, for "
          "its input, log and clock files, about 0.7 s each)")
    print("\nwhere provision's seconds go (guest clock; see benchmarks/layout_phases.py):")
    print(layout_phases.table(phases))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
