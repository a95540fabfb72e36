"""What a configdrive is, as planning checks it before anything is written: Ironic's form
(gzip+base64 of a config-2 ISO9660 image), its bounds and its label. The drivers/configdrive
module writes it."""

import base64
import binascii
import zlib

from provision_agent.errors import ImageError

CONFIG2_LABEL = "config-2"
NOCLOUD_LABEL = "cidata"


# Ironic's configdrive partition is 64 MiB: more cannot be written, so it is never inflated.
MAX_BYTES = 64 << 20
MAX_TEXT = MAX_BYTES * 4 // 3 + 4096       # its base64 text, gzip or not
FETCH_SECONDS = 300                         # MAX_TEXT at 1 MB/s with room to spare


def decode_ironic(content):
    """Ironic's configdrive string -> raw ISO bytes (gzip is optional, base64 is not)."""
    try:
        raw = base64.b64decode(content, validate=False)
    except (binascii.Error, ValueError) as exc:
        raise ImageError(f"configdrive is not base64: {exc}")
    if raw[:2] == b"\x1f\x8b":
        inflate = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            raw = inflate.decompress(raw, MAX_BYTES + 1)
        except zlib.error as exc:
            raise ImageError(f"configdrive gzip is corrupt: {exc}")
        if len(raw) > MAX_BYTES or inflate.unconsumed_tail:
            raise ImageError(f"configdrive inflates to more than {MAX_BYTES} bytes (the "
                             f"configdrive partition's size)")
    if len(raw) > MAX_BYTES:
        raise ImageError(f"configdrive is larger than {MAX_BYTES} bytes")
    return raw


def iso_label(data):
    """Volume id of an ISO9660 image (primary volume descriptor at 32 KiB), or None."""
    pvd = data[32768:32768 + 2048]
    if len(pvd) < 72 or pvd[1:6] != b"CD001":
        return None
    return pvd[40:72].decode("ascii", "replace").strip()
