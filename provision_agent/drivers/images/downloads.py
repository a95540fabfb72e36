"""An image's download on its way in: read ahead in its own thread and checked (its checksum,
its signature) without holding the download up.

Compressed, the download is handed on in the chunks it arrived in, and the checksum is taken
in a thread of its own (read_ahead()). Uncompressed, a raw or disk image is received straight
into the aligned blocks it is written from (pipeline.BlockRing over the source's readinto), and
Checks sees each block in the ring's second thread: no bytes object, no copy between the
socket and the disk (the two copies that saves were a quarter of a raw write's CPU and a sixth
of its time: benchmarks/results/2026-11-28-image_write-raw-received-into-its-blocks.md).
"""

from provision_agent.drivers.images import checksums, signature
from provision_agent.drivers.images.pipeline import ReadAhead

NET_CHUNK = 1 << 20


def read_ahead(net, expected, checksum_of, verifier):
    """The download read ahead, fed to the signature's verifier and, in a thread of its own
    (or hashing slows the download: benchmarks/image_write.md), to the compressed stream's
    checksum. Returns (the reader, its Hashing or None)."""
    top = ReadAhead(net, NET_CHUNK, depth=8, name="image-fetch")
    if verifier:
        top = signature.Tee(top, verifier)
    if not (expected and checksum_of == "compressed"):
        return top, None
    hashed = checksums.Hashing(top, expected[0])
    return ReadAhead(hashed, NET_CHUNK, depth=8, name="image-hash"), hashed


class Checks:
    """What sees an uncompressed image's blocks before they are written (BlockRing's inspect):
    its checksum and its signature's verifier."""

    def __init__(self, hashed, verifier):
        self._hashed, self._verifier = hashed, verifier

    def __call__(self, view, last):
        if self._hashed:
            self._hashed.update(view)
        if self._verifier:
            if view:
                self._verifier.put(bytes(view))     # queued: the block is refilled after this
            if last:
                self._verifier.end()
