"""What each stage of an image write costs on its own: the physical limit the whole write is held
to. Used by image_write.py, which runs these in the same minutes as the writes they bound.

  decompress  the product's own reader (images.decompressors, the gzip library it picks) over the
              compressed file, already in the page cache, into nowhere
  download    curl from the same local HTTP server into /dev/null
  write       the uncompressed bytes, from the page cache, onto the same target through the
              product's BlockWriter (O_DIRECT, fsync), nothing decompressed or hashed
  sha256      hashing the bytes ours checks (compressed or not), for reference: ours hashes in
              its download thread, so it is not a stage of its own in the limit
"""

import hashlib
import subprocess
import time

from provision_agent.drivers.images import decompressors
from provision_agent.drivers.images.blockwrite import BLOCK, BlockWriter

STAGES = ("decompress", "download", "write")


def _clock(fn):
    start = time.monotonic()
    fn()
    return time.monotonic() - start


def decompress(path, comp):
    with open(path, "rb", buffering=0) as f:
        reader = decompressors.open_decompressor(comp, f)
        while reader.read(BLOCK):
            pass


def download(url):
    subprocess.run(["curl", "-sf", "-o", "/dev/null", url], check=True)


def write(raw, dev):
    writer = BlockWriter(dev)
    try:
        with open(raw, "rb", buffering=0) as f:
            while True:
                block = f.read(BLOCK)
                if not block:
                    break
                writer.write(block)
        writer.finish()
    finally:
        writer.close()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while block := f.read(1 << 20):
            h.update(block)


def measure(comp, path, raw, url, dev, runs):
    """{stage: [seconds per run]}; no decompress stage for an uncompressed image."""
    times = {"download": [], "write": [], "sha256": []}
    if comp != "none":
        times["decompress"] = []
    for _ in range(runs):
        if comp != "none":
            times["decompress"].append(_clock(lambda: decompress(path, comp)))
        times["download"].append(_clock(lambda: download(url)))
        times["write"].append(_clock(lambda: write(raw, dev)))
        times["sha256"].append(_clock(lambda: sha256(path)))
    return times


def gzip_library():
    return decompressors.gzip_backend().__name__
