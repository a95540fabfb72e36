"""What each stage of an image write costs on its own: the physical limit the whole write is held
to. Used by image_write.py, which runs these in the same minutes as the writes they bound.

  decompress  the product's own reader (images.decompressors, the gzip library it picks) over the
              compressed file, already in the page cache, into nowhere
  download    curl from the same local HTTP server into /dev/null
  write       the uncompressed bytes, from the page cache, onto the same target through the
              product's write loop (its block ring, O_DIRECT writes in flight at once, fsync),
              nothing decompressed or hashed
  sha256      hashing the bytes ours checks (compressed or not): ours hashes in its download
              thread, so it has no wall time of its own in the limit, but its CPU time counts

The limit is the larger of the slowest stage's wall time and all stages' CPU seconds spread
over the cores this process may use (limit()): ours overlaps the stages, but on two cores the
decompressor, the hash, the HTTP server and the write's kernel work cannot all run at once.
A stage's CPU seconds are this process's and its waited-for children's (curl), the HTTP
server's and every kernel thread's (the loop device's workers, block completions) while it ran.
"""

import hashlib
import os
import subprocess
import time
from typing import NamedTuple

from provision_agent.drivers.images import decompressors, holdback, writer
from provision_agent.drivers.images.blockwrite import BLOCK
from provision_agent.drivers.images.pipeline import BlockRing

STAGES = ("decompress", "download", "write")
PF_KTHREAD = 0x00200000
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds():
    """This process's CPU time and its waited-for children's (curl, the shell pipeline)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def idle_jiffies():
    """(idle, total) CPU jiffies of the whole machine so far, all cores (/proc/stat)."""
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, irq, softirq, steal = map(int, f.readline().split()[1:9])
    return idle + iowait, user + nice + system + idle + iowait + irq + softirq + steal


def idle_share(before, after):
    """The machine's idle share between two idle_jiffies() readings: 0.5 is one core of two."""
    return (after[0] - before[0]) / max(after[1] - before[1], 1)


def process_cpu_seconds(pid):
    """A whole process's CPU time, its finished threads included: the HTTP server answers each
    request on a thread that is gone by the time the stage ends."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def kernel_threads():
    """{(pid, start time): CPU seconds} of every kernel thread. The loop device hands its I/O
    to workqueue threads, so a write's kernel work is not in the writing process's time.
    schedstat is in nanoseconds where stat's ticks would round each of a dozen threads."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if not int(fields[6]) & PF_KTHREAD:
                continue
            with open(f"/proc/{pid}/schedstat") as f:
                found[int(pid), int(fields[19])] = int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue        # gone between listdir and open
    return found


def kernel_seconds(before, after):
    """CPU seconds kernel threads spent between two kernel_threads() readings; one that started
    in between counts from zero, one that ended in between is lost (they rarely do)."""
    return sum(cpu - before.get(key, 0.0) for key, cpu in after.items())


def usable_cores():
    """The cores this process may run on: a taskset or a container's cpuset can make them fewer
    than the machine has."""
    return len(os.sched_getaffinity(0))


def meter(fn, server_pid):
    """Call fn once: {'time', 'cpu' (this process and its waited-for children), 'server',
    'kernel', 'idle' (the machine's idle share)}. time is fn's result when it returns a float,
    for a call that times its own part. The /proc scans sit outside the process's CPU window."""
    kern, server, idle = kernel_threads(), process_cpu_seconds(server_pid), idle_jiffies()
    start, cpu_start = time.monotonic(), cpu_seconds()
    own = fn()
    wall, cpu = time.monotonic() - start, cpu_seconds() - cpu_start
    return {"time": own if isinstance(own, float) else wall, "cpu": cpu,
            "server": process_cpu_seconds(server_pid) - server,
            "kernel": kernel_seconds(kern, kernel_threads()),
            "idle": idle_share(idle, idle_jiffies())}


class Limit(NamedTuple):
    seconds: float
    bound: str              # "slowest stage" or "CPU / cores"
    slowest: str
    slowest_seconds: float
    cpu_seconds: float
    cores: int


def limit(stage_seconds, stage_cpu, cores):
    """What ours cannot beat: its slowest stage alone, or all stages' CPU work spread over every
    core when that takes longer. stage_seconds: wall time per stage (sha256's is ignored, as
    ours hashes while it downloads); stage_cpu: CPU seconds per stage, sha256's included. A tie
    goes to the slowest stage, the bound that needs no model of how work shares cores."""
    slowest = max((s for s in STAGES if s in stage_seconds), key=stage_seconds.get)
    cpu = sum(stage_cpu.values())
    if cpu / cores > stage_seconds[slowest]:
        return Limit(cpu / cores, "CPU / cores", slowest, stage_seconds[slowest], cpu, cores)
    return Limit(stage_seconds[slowest], "slowest stage", slowest, stage_seconds[slowest], cpu,
                 cores)


def decompress(path, comp):
    with open(path, "rb", buffering=0) as f:
        reader = decompressors.open_decompressor(comp, f)
        while reader.read(BLOCK):
            pass


def download(url):
    subprocess.run(["curl", "-sf", "-o", "/dev/null", url], check=True)


def write(raw, dev):
    """The product's write loop (its blocks, writes in flight at once) fed from the file."""
    with open(raw, "rb", buffering=0) as f:
        ring = BlockRing(f, BLOCK, name="limit-read")
        try:
            writer._write_blocks(ring, "raw", str(raw), "none", dev, False, holdback.Taken(),
                                 False, "auto")
        finally:
            ring.close()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while block := f.read(1 << 20):
            h.update(block)


def stages(comp, path, raw, url, dev):
    """{stage: a call that runs it once}; no decompress stage for an uncompressed image."""
    found = {"download": lambda: download(url), "write": lambda: write(raw, dev),
             "sha256": lambda: sha256(path)}
    if comp != "none":
        found["decompress"] = lambda: decompress(path, comp)
    return found


def measure_round(found, server_pid, got):
    """Each of stages() once, into got: {'time' | 'cpu' | 'server' | 'kernel' | 'idle':
    {stage: [one per round]}} (see meter()). image_write runs one round after each round of
    its contenders, so that the stages and the writes they bound share the same minutes."""
    for name, fn in found.items():
        for what, value in meter(fn, server_pid).items():
            got.setdefault(what, {}).setdefault(name, []).append(value)
    return got


def gzip_library():
    return decompressors.gzip_backend().__name__
