"""Which library should inflate gzip images? (a benchmark, not a test; about a minute)

    python3 -m benchmarks.gzip_inflate [--size-mib 768] [--runs 3] [--work DIR]

Prepares (once, cached in --work) a raw image: half real files (a tar of /usr/lib/python3* and
/usr/share), half zeros, compressed with `gzip -6`. Then inflates it to nowhere, in this process,
through provision's own gzip reader (decompressors.Gzip, 4 MiB reads, as the image writer does)
once per backend that imports: ISA-L (isal), zlib-ng, and the standard zlib; `gzip -dc >
/dev/null` runs alongside as the shell's reference. Prints medians and each one's speed as a
ratio to zlib's, measured in the same run.
"""

import argparse
import io
import statistics
import subprocess
import time
from pathlib import Path

from provision_agent.drivers.images import decompressors

CHUNK = 4 << 20


def prepare(work, size_mib):
    work.mkdir(parents=True, exist_ok=True)
    raw, gz = work / f"img-{size_mib}.raw", work / f"img-{size_mib}.gz"
    if not gz.exists():
        with open(raw, "wb") as out:
            tar = subprocess.Popen(["tar", "-C", "/usr", "-cf", "-", "lib", "share"],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            left = size_mib << 19       # half of the image
            while left > 0:
                block = tar.stdout.read(min(CHUNK, left))
                if not block:
                    break
                out.write(block)
                left -= len(block)
            tar.kill()
            tar.wait()
            out.truncate(size_mib << 20)
        with open(gz, "wb") as out:
            subprocess.run(["gzip", "-6", "-c", str(raw)], stdout=out, check=True)
        raw.unlink()
    return gz


def inflate(path, backend):
    with open(path, "rb") as f:
        reader = decompressors.Gzip(io.BufferedReader(f, CHUNK), backend=backend)
        total = 0
        while True:
            block = reader.read(CHUNK)
            if not block:
                return total
            total += len(block)


def timed(fn, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=768)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/provision-gzip-bench"))
    opts = ap.parse_args()
    gz = prepare(opts.work, opts.size_mib)
    print(f"input: {gz} ({gz.stat().st_size >> 20} MiB gzip, {opts.size_mib} MiB raw), "
          f"median of {opts.runs}")
    results = {}
    for name in decompressors.GZIP_BACKENDS:
        backend = decompressors.gzip_backend((name,))
        if backend.__name__ != name:
            print(f"  {name:<16} not installed")
            continue
        out = inflate(gz, backend)
        assert out == opts.size_mib << 20, f"{name} inflated {out} bytes"
        results[name] = timed(lambda: inflate(gz, backend), opts.runs)

    def shell():
        with open(gz, "rb") as src:
            subprocess.run(["gzip", "-dc"], stdin=src, stdout=subprocess.DEVNULL, check=True)
    results["gzip -dc (shell)"] = timed(shell, opts.runs)
    base = results.get("zlib")
    mib = opts.size_mib
    for name, secs in results.items():
        ratio = f"{base / secs:5.2f}x zlib" if base else ""
        print(f"  {name:<16} {secs:6.2f} s  {mib / secs:7.1f} MiB/s out  {ratio}")
    print(f"chosen by provision: {decompressors.gzip_backend().__name__}")


if __name__ == "__main__":
    main()
