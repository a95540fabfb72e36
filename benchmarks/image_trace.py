"""Where each thread of one image write spends its time (a benchmark aid, not a test; root).

    python3 -m benchmarks.image_trace [--input zstd|gzip|none] [--runs 3] [--target-dir /var/tmp]

image_write.py shows ours slower than its slowest stage while the machine sits partly idle:
the stages overlap less than they could. This writes the same image the same way (its cached
image, its local HTTP server, a loop device with direct I/O) while a sampler thread reads every
thread's stack each --interval-ms and charges the time since its last look to what each thread
is doing: its innermost frame in provision_agent, named by file, line and function, or, when
that frame waits on a lock, queue or future, "wait" with the frame that waits. A thread in C
with the GIL released (decompressing, writing, hashing) shows as the frame that called it.

The sampler itself needs the GIL between two looks, so a thread that holds it in bytecode
delays the look; the time is still charged to what that thread was doing when looked at.
"""

import argparse
import collections
import os
import sys
import threading
import time
from pathlib import Path

from benchmarks import image_write
from provision_agent.drivers.images import writer
from provision_agent.run.runner import Runner

WAITS = {"wait", "get", "put", "acquire", "result", "_wait_for_tstate_lock", "join"}
OURS = os.sep + "provision_agent" + os.sep


def what(frame):
    """(state, where) of one thread's stack: state "run" or "wait"; where, our frame."""
    inner = frame.f_code.co_name
    state = "wait" if inner in WAITS else "run"
    while frame is not None and OURS not in frame.f_code.co_filename:
        frame = frame.f_back
    if frame is None:
        return state, f"(outside provision_agent: {inner})"
    path = frame.f_code.co_filename.split(OURS, 1)[1]
    return state, f"{path}:{frame.f_lineno} {frame.f_code.co_name}"


class Sampler:
    def __init__(self, interval):
        self.interval = interval
        self.seconds = collections.Counter()    # (thread name, state, where) -> seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def _run(self):
        me = threading.get_ident()
        last = time.perf_counter()
        while not self._stop.wait(self.interval):
            now = time.perf_counter()
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident != me:
                    state, where = what(frame)
                    self.seconds[(names.get(ident, str(ident)), state, where)] += now - last
            last = now

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def report(seconds, runs, wall, top):
    by_thread = collections.defaultdict(list)
    for (thread, state, where), s in seconds.items():
        # the pool's threads are numbered per run: one row for all of them
        base = thread.rsplit("_", 1)[0] if thread.startswith("image-write") else thread
        by_thread[base].append((s, state, where))
    print(f"\nper run, mean of {runs}: wall {wall:.2f} s; each thread's time by what it did")
    for thread, rows in sorted(by_thread.items(), key=lambda kv: -sum(r[0] for r in kv[1])):
        merged = collections.Counter()
        for s, state, where in rows:
            merged[(state, where)] += s
        total = sum(merged.values())
        waited = sum(s for (state, _), s in merged.items() if state == "wait")
        print(f"\n{thread}: {total / runs:.2f} s seen, {waited / runs:.2f} s of it waiting")
        for (state, where), s in merged.most_common(top):
            print(f"  {s / runs:6.3f} s {s / total:5.0%}  {state:4s}  {where}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", choices=("zstd", "gzip", "none"), default="zstd")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--work", default="/var/tmp/provision-image-bench")
    ap.add_argument("--target-dir", default="/var/tmp")
    ap.add_argument("--interval-ms", type=float, default=1.0)
    ap.add_argument("--top", type=int, default=6, help="rows per thread")
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (loop devices)")
    print(image_write.sh("uptime").strip())
    images = image_write.prepare(Path(opts.work), opts.size_mib)
    path, raw = images[opts.input], images["none"]
    sha = "sha256:" + image_write.sha256_of(path)
    backing = Path(opts.target_dir) / "provision-image-trace-target"
    runner = Runner()
    with image_write.served_onto_loop(opts.work, raw.stat().st_size, backing) as (port, _, dev):
        url = f"http://127.0.0.1:{port}/{path.name}"
        walls, seconds = [], collections.Counter()
        for _ in range(opts.runs):
            image_write.reset(runner, dev)
            with Sampler(opts.interval_ms / 1000) as sampler:
                start = time.monotonic()
                writer.write_to(url, dev, fmt="raw", checksum=sha, runner=runner, grow=False)
                walls.append(time.monotonic() - start)
            seconds.update(sampler.seconds)
        if image_write.sha256_of(dev, raw.stat().st_size) != image_write.sha256_of(raw):
            sys.exit("the trace's write left a wrong image on the target")
    print(f"{opts.input}: {path.name}, runs {', '.join(f'{w:.2f}' for w in walls)} s")
    report(seconds, opts.runs, sum(walls) / len(walls), opts.top)
    print(image_write.sh("uptime").strip())


if __name__ == "__main__":
    main()
