"""Image checksums computed while streaming: "algo:hex" for md5, sha256 or sha512.

hashlib releases the GIL on large updates, so hashing in the reader threads overlaps the
decompression and the disk writes.
"""

import hashlib

from provision_agent.drivers.images.pipeline import read_into
from provision_agent.errors import ImageError

ALGORITHMS = {"md5": 32, "sha256": 64, "sha512": 128}


def parse(checksum, algo=None):
    """(algo, hexdigest) from "algo:hex", or from a bare hex value plus algo."""
    if checksum is None:
        return None
    text = str(checksum).strip()
    if ":" in text:
        algo, text = text.split(":", 1)
    algo = (algo or "").lower()
    value = text.lower()
    if algo not in ALGORITHMS:
        raise ImageError(f"checksum {checksum!r}: algorithm must be one of "
                         f"{', '.join(ALGORITHMS)} (written as algo:hex)")
    if len(value) != ALGORITHMS[algo] or any(c not in "0123456789abcdef" for c in value):
        raise ImageError(f"checksum {checksum!r}: a {algo} value is {ALGORITHMS[algo]} hex digits")
    return algo, value


class Hashing:
    """A reader that hashes what passes through it; with no reader, update() is fed directly."""

    def __init__(self, reader, algo):
        self._src = reader
        self.algo = algo
        self._hash = hashlib.new(algo)

    def update(self, data):
        self._hash.update(data)

    def read(self, n):
        data = self._src.read(n)
        self._hash.update(data)
        return data

    def readinto(self, view):
        n = read_into(self._src, view)
        self._hash.update(view[:n])
        return n

    def hexdigest(self):
        return self._hash.hexdigest()

    def close(self):
        if self._src is not None:
            self._src.close()


def verify(expected, actual_hex, what):
    algo, value = expected
    if actual_hex != value:
        raise ImageError(f"{what}: {algo} checksum mismatch: expected {value}, got {actual_hex}")
