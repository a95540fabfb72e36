"""Reading back what is on a test device: the checksum of a byte range, as the tests that
keep a partition compare it before and after a re-provision."""

import hashlib


def sha256_at(path, offset, size):
    with open(path, "rb") as f:
        f.seek(offset)
        return hashlib.sha256(f.read(size)).hexdigest()
