"""Stream an image from its source to its target: fetch, checksum, decompress, write, verify,
then fit it to its volume.

Threads overlap the work: the source is read ahead (network); the checksum of the compressed
stream is taken in a second thread (of the decompressed one, in the third); decompression runs
in a third straight into a few 4 MiB aligned blocks (pipeline.BlockRing); and the caller's
thread hands those blocks to two writes at once (blockwrite.InFlight: O_DIRECT where possible,
zero blocks skipped when the target is known to be zeroed). An uncompressed raw or disk image
skips the middle: it is received straight into those blocks and checked beside them
(downloads.py). The checksum is checked before the image is grown or reported: a mismatch or a
truncated stream is an ImageError, never a success. A signed image is also fed, as downloaded,
to the signature verifier (signature.py). An image with a checksum or a signature is kept
invisible on the target until it verifies, and wiped from it when anything fails (holdback.py).

write_to() is the plain keyword API; write_step.write_image() adapts a plan step's args and the
run's options to it for the executor.
"""

import logging
import os
import time
from dataclasses import dataclass

from provision_agent.drivers import image_sectors, partitions
from provision_agent.drivers.images import (
    checksums,
    decompressors,
    downloads,
    formats,
    holdback,
    qcow2,
    sources,
)
from provision_agent.drivers.images.blockwrite import BLOCK, ZERO_GRAIN, BlockWriter, InFlight
from provision_agent.drivers.images.pipeline import BlockRing, Counting, Peek, ReadAhead
from provision_agent.drivers.images.progress import Progress
from provision_agent.errors import DiskGone, DiskStalled, ImageError

LOG = logging.getLogger(__name__)

HEAD = 8192             # what _check_content and _fit look at (a 4Kn GPT header at 4096)
QCOW2_MAGIC = b"QFI\xfb"


@dataclass
class WriteReport:
    bytes_in: int
    bytes_written: int
    seconds: float
    mb_per_s: float
    checksum_actual: str | None
    zero_bytes_skipped: int
    compression: str = "none"
    zero_bytes_zeroed: int = 0      # given to the device's write-zeroes (blockwrite.py)


def _check_content(fmt, head, uri, compression):
    """Refuse data that is plainly not what the step says, before it reaches the disk."""
    inner = decompressors.detect(head)
    if inner != "none" and fmt != "tar":
        raise ImageError(f"image {uri}: after {compression!r} decompression the data is still "
                         f"{inner}-compressed; set compression to match the file")
    is_qcow2 = head.startswith(QCOW2_MAGIC)
    if fmt == "qcow2" and not is_qcow2:
        raise ImageError(f"image {uri}: format is 'qcow2' but the data has no qcow2 header")
    if fmt in ("raw", "disk", "tar") and is_qcow2:
        raise ImageError(f"image {uri}: the data is a qcow2 image but format is {fmt!r}")
    if fmt == "tar" and head[257:262] != b"ustar":
        raise ImageError(f"image {uri}: format is 'tar' but the data is not a tar archive")
    if fmt == "disk" and (len(head) < 512 or head[510:512] != b"\x55\xaa"):
        raise ImageError(f"image {uri}: format is 'disk' but the data does not start with a "
                         f"partition table (no MBR/protective-MBR signature)")


def write_to(uri, target_path=None, *, fmt, compression="auto", checksum=None,
             checksum_of="compressed", allow_no_checksum=False, fs_type=None, mount_dir=None,
             tls_verify=True, ca_bundle=None, headers=None, target_zeroed=False, runner,
             events=None, tmp_dir=None, grow=True, stall=None, verifier=None,
             zero_policy="auto", table_follows=False, whole_disk=False):
    """Write the image at uri to target_path (raw, disk, qcow2) or mount_dir (tar); verifier:
    a signature.Verifier fed the downloaded bytes. One with a checksum or a verifier is visible
    only once both say yes, taken back when anything fails. table_follows: the configdrive's
    partition is added to a disk image's table next (sgdisk moves GPT's backup, re-reads)."""
    expected = _expected(uri, fmt, checksum, checksum_of, allow_no_checksum,
                         target_path if fmt != "tar" else mount_dir)
    guarded = bool(expected or verifier)
    start = time.monotonic()
    source = sources.open_source(uri, tls_verify=tls_verify, ca_bundle=ca_bundle,
                                 headers=headers, **(stall or {}))
    progress = Progress(events, total=source.size, label=f"image {uri}")
    top = counted = Counting(source, progress.update)
    taken, zeroed = holdback.Taken(), 0
    try:
        top = net = Peek(top)
        if compression in (None, "auto"):
            compression = decompressors.detect(net.peek(8))
        top, hashed = _stream(net, fmt, compression, expected, checksum_of, verifier)
        if fmt in ("raw", "disk"):
            head, skipped, zeroed = _write_blocks(top, fmt, uri, compression, target_path,
                                                  target_zeroed, taken, guarded, zero_policy,
                                                  fault=lambda: getattr(runner, "fault", None))
        else:
            top = data = ReadAhead(top, BLOCK, depth=3, name="image-decompress")
            head = data.read_full(BLOCK)
            _check_content(fmt, head, uri, compression)
            taken.written, skipped = _extract(fmt, head, data, target_path, mount_dir, runner, (
                expected, hashed, verifier, whole_disk), uri, tmp_dir)
        progress.finish()
        actual = f"{hashed.algo}:{hashed.hexdigest()}" if hashed else None
        if fmt in ("raw", "disk"):
            _verify(expected, hashed, uri, verifier)
            if taken.held:
                taken.held.release(target_path)
        _fit(runner, fmt, head, target_path, fs_type, grow, table_follows)
    except BaseException as exc:
        # a disk that does not answer takes nothing back, whatever the image's error was (a
        # take-back's unlink waits in the kernel on it for ever)
        faulted = isinstance(exc, (DiskStalled, DiskGone)) or isinstance(
            getattr(runner, "fault", None), (DiskStalled, DiskGone))
        if guarded and not faulted:
            holdback.take_back(runner, fmt, target_path, mount_dir, taken, zero_policy)
        elif guarded:
            LOG.error("%s stopped answering or went away: what of the image reached it stays "
                      "there", target_path or mount_dir)
        raise
    finally:
        top.close()
        if verifier:
            verifier.close()
        if taken.held:
            taken.held.close()
    seconds, written = time.monotonic() - start, taken.written
    return WriteReport(bytes_in=counted.count, bytes_written=written,
                       seconds=round(seconds, 3), mb_per_s=round(written / 1e6 / seconds, 1),
                       checksum_actual=actual, zero_bytes_skipped=skipped,
                       compression=compression, zero_bytes_zeroed=zeroed)


def _stream(net, fmt, compression, expected, checksum_of, verifier):
    """(the reader the image's data comes out of, the Hashing that checks it or None): for raw
    and disk a BlockRing of aligned blocks to write from, else a decompressed stream."""
    if fmt in ("raw", "disk") and compression == "none":
        # downloaded straight into the blocks it is written from, checked beside them
        hashed = checksums.Hashing(None, expected[0]) if expected else None
        checks = downloads.Checks(hashed, verifier) if hashed or verifier else None
        return BlockRing(net, BLOCK, name="image-fetch", inspect=checks), hashed
    top, hashed = downloads.read_ahead(net, expected, checksum_of, verifier)
    try:
        top = decompressors.open_decompressor(compression, top)
        if expected and checksum_of == "raw":
            top = hashed = checksums.Hashing(top, expected[0])
        if fmt in ("raw", "disk"):
            top = BlockRing(top, BLOCK, name="image-decompress")
    except BaseException:
        top.close()     # what was built so far: its threads stop (closing net again is harmless)
        raise
    return top, hashed


def _expected(uri, fmt, checksum, checksum_of, allow_no_checksum, target):
    """The parsed checksum, once the arguments make sense; target: the device or, for tar,
    the mounted directory."""
    if fmt not in formats.FORMATS:
        raise ImageError(f"image format {fmt!r} is not one of {', '.join(formats.FORMATS)}")
    if checksum_of not in ("compressed", "raw"):
        raise ImageError(f"checksum_of must be 'compressed' or 'raw', not {checksum_of!r}")
    expected = checksums.parse(checksum)
    if expected is None and not allow_no_checksum:
        raise ImageError(f"image {uri}: no checksum given (set allow_no_checksum to write an "
                         f"unverified image)")
    if not target:
        raise ImageError(f"image {uri}: " + ("a tar image needs a mounted directory to extract "
                         "into" if fmt == "tar" else f"a {fmt} image needs a target device"))
    return expected


def _fit(runner, fmt, head, target, fs_type, grow, table_follows):
    """A verified image fitted to its target: a filesystem grown, a disk's table seen."""
    if fmt == "raw" and grow:
        formats.grow_fs(runner, target, fs_type)
    elif fmt == "disk" and not table_follows:
        if image_sectors.table_sector_size(head)[1] == "gpt" and not os.path.isfile(target):
            formats.move_gpt_backup_to_end(runner, target)
        formats.reread_partitions(runner, target)


def _verify(expected, hashed, uri, verifier=None):
    if expected:
        checksums.verify(expected, hashed.hexdigest(), f"image {uri}")
    if verifier:
        verifier.verdict()


class _Rest:
    """The already-read head followed by the rest of the stream."""

    def __init__(self, head, reader):
        self._head, self._src = head, reader

    def read(self, n):
        if self._head:
            data, self._head = self._head[:n], self._head[n:]
            return data
        return self._src.read_full(n)


def _write_blocks(ring, fmt, uri, compression, target, zeroed, taken, hold, zero_policy,
                  fault=None):
    """raw and disk: each decompressed block is written from the ring's block it was inflated
    into; the image's zero runs go to the device's write-zeroes (BlockWriter) unless
    zero_policy is never.
    taken gets the bytes written and, with hold, the held-back start (as soon as it is
    taken). Returns (head, zero bytes skipped, zero bytes the device zeroed)."""
    block, n = ring.next()
    head = bytes(block[:min(n, HEAD)])
    _check_content(fmt, head, uri, compression)
    if fmt == "disk":       # a table made for other sectors than the disk's cannot boot
        image_sectors.check(block[:n], target, partitions.logical_sector_size(target), uri)
    held = taken.held = holdback.Held(block, n) if hold else None
    writer = BlockWriter(target, target_zeroed=zeroed, zero_out=zero_policy != "never")
    writes = InFlight(writer, fault=fault)
    try:
        while True:
            writes.submit(block, n, done=ring.give_back)
            if n < BLOCK:
                break
            block, n = ring.next()
        writes.drain()
        writer.finish()
    finally:
        writes.close()
        if not writes.abandoned:    # a write stuck in the kernel still holds the descriptor
            writer.close()
        taken.written = writer.offset
    skipped, zeroed = writer.zero_bytes_skipped, writer.zero_bytes_zeroed
    if held and held.size >= ZERO_GRAIN:
        # the zeros in its place were left out (seeked over or zeroed); it is written later
        if writer.target_zeroed:
            skipped -= ZERO_GRAIN
        elif zeroed >= ZERO_GRAIN:
            zeroed -= ZERO_GRAIN
    LOG.info("wrote %s bytes to %s (%s zero bytes skipped, %s zeroed by the device, O_DIRECT "
             "%s%s)", writer.offset, target, skipped, zeroed, "on" if writer.direct else "off",
             f"; the first {held.size} held back until the image verifies" if held else "")
    return head, skipped, zeroed


def _extract(fmt, head, data, target, mount_dir, runner, checks, uri, tmp_dir):
    """tar into the mounted filesystem; qcow2 spooled to a file, then converted.
    checks: (expected checksum, its Hashing, the signature verifier), judged at the end, and
    whole_disk: a qcow2 converted onto a whole disk (write_to's keyword; a disk image is one
    always), whose partition table must be made for the disk's sector size."""
    expected, hashed, verifier, whole_disk = checks
    if fmt == "tar":
        counter = Counting(_Rest(head, data))
        formats.extract_tar(runner, counter, mount_dir, BLOCK)
        _verify(expected, hashed, uri, verifier)
        return counter.count, 0
    counter = Counting(_Rest(head, data))
    with formats.spool(counter, BLOCK, tmp_dir) as tmp:
        _verify(expected, hashed, uri, verifier)
        if whole_disk:      # as a disk image's first block: a table for other sectors
            qcow2.info(runner, tmp.name)        # self-contained before anything reads it
            image_sectors.check(qcow2.head(runner, tmp.name, BLOCK, tmp_dir), target,
                                partitions.logical_sector_size(target), uri)
        formats.convert_qcow2(runner, tmp.name, target)
    return counter.count, 0
