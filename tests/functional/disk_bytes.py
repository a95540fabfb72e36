"""Reading back what is on a test device: the checksum of a byte range, as the tests that
keep a partition compare it before and after a re-provision."""

import hashlib

CHUNK = 4 << 20     # read in pieces: a whole device's range would sit in the test's memory


def sha256_at(path, offset=0, size=None):
    """sha256 of size bytes from offset; size None: to the end (a block device's size is not
    its st_size)."""
    size = float("inf") if size is None else size
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(offset)
        while size > 0:
            data = f.read(min(CHUNK, size))
            if not data:
                break
            digest.update(data)
            size -= len(data)
    return digest.hexdigest()
