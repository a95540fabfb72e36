"""Would zstd images write faster decoded on both cores? (a benchmark, not a test; a minute)

    python3 -m benchmarks.zstd_decode [--raw /var/tmp/provision-image-bench/ext4-1024m.img]

libzstd decodes one frame on one thread: `zstd -T#` only spawns compression threads, and
`zstd -T2` still writes a single frame. Only an image cut into several frames (pzstd, or any
compressor that restarts a frame every few MiB) can be decoded on two cores at once. This
takes the image_write benchmark's raw image (cached there), makes a single-frame `zstd -3 -T2`
copy and a multi-frame `pzstd -3 -p2` copy, and inflates each into nowhere, median of --runs:

  stream      provision's own reader (images.decompressors.Zstd), one thread, the whole stream
  frames x2   the multi-frame copy, its frames decoded by two threads at once (zstandard
              releases the GIL), output in order, what a frame-parallel reader could reach
  zstd -dc    the shell's decoder, for reference

and prints load averages, since the machine is shared.
"""

import argparse
import concurrent.futures
import os
import subprocess
import threading
from pathlib import Path

import zstandard

from benchmarks.gzip_inflate import timed
from provision_agent.drivers.images import decompressors
from provision_agent.drivers.images.blockwrite import BLOCK

SKIPPABLE = 0x184D2A50      # pzstd puts each frame's compressed size in one of these


def compressed(raw, suffix, argv):
    out = raw.with_name(raw.name + suffix)
    if not out.exists():
        with open(out.with_suffix(".tmp"), "wb") as f:
            subprocess.run(argv + [str(raw)], stdout=f, check=True)
        out.with_suffix(".tmp").rename(out)
    return out


def pzstd_frames(data):
    """The zstd frames of a pzstd file, split by the sizes in its skippable frames."""
    view, frames, pos = memoryview(data), [], 0
    while pos < len(data):
        magic = int.from_bytes(view[pos:pos + 4], "little")
        if magic & 0xFFFFFFF0 != SKIPPABLE:
            raise SystemExit(f"not a pzstd file: no skippable frame at byte {pos}")
        size = int.from_bytes(view[pos + 8:pos + 12], "little")
        start = pos + 12
        frames.append(view[start:start + size])
        pos = start + size
    return frames


def stream(path):
    with open(path, "rb", buffering=0) as f:
        reader = decompressors.Zstd(f)
        total = 0
        while block := reader.read(BLOCK):
            total += len(block)
    return total


def frames_parallel(frames, threads):
    """Each thread inflates whole frames into its own reused block (fresh output buffers
    would add a page fault per 4 KiB, more than the decoding saves); the output is
    counted, as a writer would take it in frame order."""
    local = threading.local()

    def one(frame):
        if not hasattr(local, "d"):
            # a ZstdDecompressor must not be shared between threads
            local.d, local.buf = zstandard.ZstdDecompressor(), bytearray(BLOCK)
        total = 0
        with local.d.stream_reader(frame) as reader:
            while n := reader.readinto(local.buf):
                total += n
        return total

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(one, frames))


def shell(path):
    subprocess.run(["zstd", "-dc", str(path)], stdout=subprocess.DEVNULL, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--raw", type=Path,
                    default=Path("/var/tmp/provision-image-bench/ext4-1024m.img"))
    ap.add_argument("--runs", type=int, default=3)
    opts = ap.parse_args()
    print("load at start:", os.getloadavg())
    raw_size = opts.raw.stat().st_size
    single = compressed(opts.raw, ".zst", ["zstd", "-3", "-T2", "-q", "-c"])
    multi = compressed(opts.raw, ".pzst", ["pzstd", "-3", "-p", "2", "-q", "-c"])
    frames = pzstd_frames(multi.read_bytes())
    assert stream(single) == stream(multi) == raw_size
    assert frames_parallel(frames, 2) == raw_size
    rows = [
        (f"stream, zstd -3 -T2 ({single.stat().st_size >> 20} MiB)", lambda: stream(single)),
        (f"stream, pzstd -3 ({multi.stat().st_size >> 20} MiB, {len(frames)} frames)",
         lambda: stream(multi)),
        ("frames x1, pzstd", lambda: frames_parallel(frames, 1)),
        ("frames x2, pzstd", lambda: frames_parallel(frames, 2)),
        ("zstd -dc, zstd -3 -T2", lambda: shell(single)),
    ]
    print(f"{raw_size >> 20} MiB out, median of {opts.runs}")
    for name, fn in rows:
        secs = timed(fn, opts.runs)
        print(f"  {name:<44} {secs:6.2f} s  {raw_size / 1e6 / secs:6.0f} MB/s")
    print("load at end:", os.getloadavg())


if __name__ == "__main__":
    main()
