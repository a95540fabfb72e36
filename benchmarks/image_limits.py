"""What each stage of an image write costs on its own: the physical limit the whole write is held
to. Used by image_write.py, which runs these in the same minutes as the writes they bound.

  decompress  the product's own reader (images.decompressors, the gzip library it picks) over the
              compressed file, already in the page cache, into nowhere
  download    curl from the same local HTTP server into /dev/null
  write       the uncompressed bytes, from the page cache, onto the same target through the
              product's write loop (its block ring, O_DIRECT writes in flight at once, fsync),
              nothing decompressed or hashed
  sha256      hashing the bytes ours checks (compressed or not), for reference: ours hashes in
              its download thread, so it is not a stage of its own in the limit
"""

import hashlib
import os
import subprocess
import time
from typing import NamedTuple

from provision_agent.drivers.images import decompressors, writer
from provision_agent.drivers.images.blockwrite import BLOCK
from provision_agent.drivers.images.pipeline import BlockRing

STAGES = ("decompress", "download", "write")


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


def _clock(fn, cpu):
    start, cpu_start = time.monotonic(), cpu_seconds()
    fn()
    cpu.append(cpu_seconds() - cpu_start)
    return time.monotonic() - start


def usable_cores():
    """The cores this process may run on: a taskset or a container's cpuset can make them fewer
    than the machine has."""
    return len(os.sched_getaffinity(0))


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
            writer._write_blocks(ring, "raw", str(raw), "none", dev, False)
        finally:
            ring.close()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while block := f.read(1 << 20):
            h.update(block)


def measure(comp, path, raw, url, dev, runs):
    """({stage: [wall seconds per run]}, {stage: [CPU seconds per run]}); no decompress stage
    for an uncompressed image."""
    stages = {"download": lambda: download(url), "write": lambda: write(raw, dev),
              "sha256": lambda: sha256(path)}
    if comp != "none":
        stages["decompress"] = lambda: decompress(path, comp)
    times = {name: [] for name in stages}
    cpu = {name: [] for name in stages}
    for _ in range(runs):
        for name, fn in stages.items():
            times[name].append(_clock(fn, cpu[name]))
    return times, cpu


def gzip_library():
    return decompressors.gzip_backend().__name__
