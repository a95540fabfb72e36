"""From provision's start to its first write, in the VM bench (issue 58; a benchmark, not a test).

What the conductor's job pays in the ramdisk before the image: the interpreter and imports,
the input and the data driver, disk discovery (each command's time from the runner's log),
planning and preflight, up to the first step (the wipe) and to `write_image`. One VM per
ramdisk, booted one after the other, each running the same work: the lab's row 1 document
(Ironic's data driver, a whole-disk raw image, BIOS, root hint /dev/vda, two 4 GiB disks)
with the image served from the host:

    python3 -m benchmarks.provision_startup [--runs 3] [LABEL=RAMDISK_DIR ...]

Without a LABEL=DIR the ramdisk is built from the working tree (tests/vmbench/ramdisk.py).
Per ramdisk it prints `python3 -X importtime -c 'import provision_agent.cli.main'` (total and
the heaviest modules), then for each run the phases by the guest's clock. In a ramdisk with
the warm server (provision_agent/cli/warm.py) the runs alternate between a run in its own
process (PROVISION_WARM=off: cold, as before the server) and one through the server (warm):
the baseline and the change side by side in one VM.
"""

import hashlib
import json
import re
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

from tests.vmbench import VM, FileServer
from tests.vmbench.ramdisk import Ramdisk

MiB = 1 << 20
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\w+) (\S+): (.*)$")
RUN = re.compile(r"^run: (\S+)")
EXIT = re.compile(r"^exit -?\d+ after ([0-9.]+)s: ")
STEP = re.compile(r"^step (\d+)/\d+: (.*)$")
IMPORT = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def make_image(served):
    """A 64 MiB whole-disk raw image: GPT, one ext4 partition. Its checksum."""
    raw = served / "disk.raw"
    with open(raw, "wb") as f:
        f.truncate(64 * MiB)
    subprocess.run(["sgdisk", "-n1:2048:+32M", "-t1:8300", str(raw)], check=True,
                   capture_output=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-E", f"offset={2048 * 512}", str(raw), "32M"],
                   check=True, capture_output=True)
    return hashlib.sha256(raw.read_bytes()).hexdigest()


def document(url, digest):
    return {"node_uuid": "5a1d1f0e-8b2c-4f6b-9f3d-7c0e2a4b6d88", "boot_mode": "bios",
            "properties": {"root_device": {"name": "/dev/vda"}},
            "instance_info": {"image_source": url, "image_disk_format": "raw",
                              "image_os_hash_algo": "sha256", "image_os_hash_value": digest,
                              "root_gb": 1}}


def imports(text):
    """(total s, [(cumulative s, module)] heaviest top-level first) of -X importtime output."""
    top, rows = 0, []
    for line in text.splitlines():
        m = IMPORT.match(line)
        if m:
            cumulative, depth, name = int(m.group(2)), len(m.group(3)) // 2, m.group(4)
            rows.append((cumulative / 1e6, depth, name))
            top += cumulative if depth == 0 else 0
    heavy = sorted((r for r in rows if r[1] <= 1), reverse=True)[:12]
    return top / 1e6, [(round(c, 2), "  " * d + n) for c, d, n in heavy]


def _seconds(stamp):
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def phases(log, started):
    """{phase: s} of one run's --log_file: start-up (process start → first log line), the
    commands before step 1 (each program's total), the Python between them, and the first
    steps up to write_image."""
    first = step1 = image = None
    tools, command, marks = {}, None, []
    for line in log.splitlines():
        m = STAMP.match(line)
        if not m:
            continue
        t, message = _seconds(m.group(1)), m.group(4)
        first = t if first is None else first
        s = STEP.match(message)
        if s and step1 is None:
            step1 = t
        if s and image is None and "image" in s.group(2) and "wipe" not in s.group(2):
            image = t
        if message.startswith("start-up: "):
            marks.append(message)
        r, e = RUN.match(message), EXIT.match(message)
        if r:
            command = r.group(1)
        if e and step1 is None and command:
            tools[command] = tools.get(command, 0.0) + float(e.group(1))
    if first is None:
        return {"start-up (no log)": 0.0}, tools, marks
    step1 = step1 or first
    out = {"process start → first log line": first - started,
           "first log line → step 1 (input, discovery, planning, preflight)": step1 - first,
           "  of which commands": sum(tools.values()),
           "step 1 → write_image starts": (image or step1) - step1,
           "process start → write_image starts": (image or step1) - started}
    return {k: round(v, 2) for k, v in out.items()}, tools, marks


def run_once(vm, n, mode, doc_path):
    """One provision run (mode: "cold" PROVISION_WARM=off, or "warm"), timed by the guest's
    clock around the command; (exit status, (start, end), log text)."""
    log = f"/tmp/vmbench/startup-{n}.log"
    res = vm.ssh(["sh", "-c", 'date +%s.%N; PROVISION_WARM="$1" provision --data_driver ironic '
                  f'--input_data_file {doc_path} --log_file {log} --events_file '
                  f'/tmp/vmbench/startup-{n}.jsonl >/dev/null 2>&1; rc=$?; date +%s.%N; '
                  'exit $rc', "sh", "off" if mode == "cold" else "on"], check=False)
    clock = tuple(float(t) for t in res.stdout.split()[:2])
    text = vm.ssh(["cat", log], check=False).stdout
    (vm.artifacts / f"startup-{n}-{mode}.log").write_text(text)
    return res.returncode, clock, text


def measure(label, ramdisk, doc, runs):
    print(f"\n== {label}: {ramdisk.directory if ramdisk else 'built from the working tree'}")
    with VM(disks=2, disk_size="4G", name=f"startup-{label}", ramdisk=ramdisk) as vm:
        vm.ssh("python3 -c pass")
        for code in ("pass", "import provision_agent.cli.main"):
            for _ in range(2):
                res = vm.ssh(["python3", "-X", "importtime", "-c", code])
                total, heavy = imports(res.stderr)
                print(f"importtime {code!r}: {total:.2f} s")
        for cumulative, name in heavy:
            print(f"   {cumulative:6.2f} s  {name}")
        warm = vm.ssh("for i in $(seq 120); do grep -s ready /var/log/provision-warm.log "
                      "&& exit 0; sleep 1; done; exit 1", check=False)
        print(f"warm server: {warm.stdout.strip() or 'none in this ramdisk'}")
        vm.ssh("mkdir -p /tmp/vmbench")
        vm.write_text("/tmp/vmbench/startup.json", json.dumps(doc))
        modes = ("cold", "warm") if warm.returncode == 0 else ("cold",)
        for n in range(runs * len(modes)):
            mode = modes[n % len(modes)]
            rc, clock, log = run_once(vm, n, mode, "/tmp/vmbench/startup.json")
            result, tools, marks = phases(log, clock[0])
            print(f"run {n + 1} ({mode}): exit {rc}, {clock[1] - clock[0]:.1f} s in all")
            for k, v in result.items():
                print(f"   {v:6.2f} s  {k}")
            print("   commands before step 1: " + ", ".join(
                f"{k} {v:.2f}" for k, v in sorted(tools.items(), key=lambda kv: -kv[1])))
            for mark in marks:
                print(f"   {mark}")


def main(argv):
    runs = 3
    if argv[:1] == ["--runs"]:
        runs, argv = int(argv[1]), argv[2:]
    ramdisks = [a.split("=", 1) for a in argv] or [("tree", None)]
    with tempfile.TemporaryDirectory() as tmp:
        served = Path(tmp)
        digest = make_image(served)
        with FileServer(served) as srv:
            # the image's head is read and its download closed before the run (image_tables):
            # the reset the server sees then is no error of anyone's
            srv._server.handle_error = lambda request, address: None
            doc = document(srv.guest_url("disk.raw"), digest)
            for label, path in ramdisks:
                measure(label, Ramdisk(Path(path)) if path else None, doc, runs)


if __name__ == "__main__":
    main(sys.argv[1:])
