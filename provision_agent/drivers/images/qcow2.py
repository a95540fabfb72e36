"""Only a self-contained qcow2 is converted.

A qcow2 may name a backing file or an external data file, and `qemu-img convert` reads them:
a tenant's image naming /etc/ssh/ssh_host_ed25519_key, the ramdisk's kernel or another disk
got those bytes copied into its own disk (the class of CVE-2024-44082, which Ironic and
ironic-python-agent fixed by inspecting images first). So, before the conversion:

1. The header is read here (the qcow2 format, qemu's docs/interop/qcow2.txt): version 2 or
   3, no backing file, no encryption, and no incompatible feature but those known to be safe
   to read (an external data file is one such bit; an unknown one may be anything).
2. `qemu-img info -f qcow2 --output=json` must agree: the format is given, never probed, and
   without --backing-chain qemu-img opens neither the backing nor the data file (qemu 7.2.12
   and later: bookworm's is 7.2.22). It runs under prlimit as OpenStack runs it (1 GiB of
   address space, 30 s of CPU), since a crafted image can make it allocate or spin.
3. The conversion names the image as `json:{..., "backing": null}`, so qemu-img would not
   open a backing file even if one got past 1 and 2.

What is shown of the image's own strings (a backing file name, qemu-img's complaint) is cut
to a few dozen characters and quoted.
"""

import json
import os
import struct
import tempfile

from provision_agent.errors import CommandError, ImageError

MAGIC = b"QFI\xfb"
# incompatible feature bits: 0 dirty, 1 corrupt, 3 compression type, 4 extended L2 entries
# change how the image is read, not what it reads; 2 is an external data file
SAFE_INCOMPATIBLE = 0b11011
DATA_FILE_BIT = 1 << 2
LIMITS = ("prlimit", f"--as={1 << 30}", "--cpu=30")
INFO_SECONDS = 60
SHOWN = 60


def shown(text):
    text = str(text)
    return repr(text[:SHOWN]) + ("…" if len(text) > SHOWN else "")


def check_header(path):
    with open(path, "rb") as f:
        head = f.read(104)
    if len(head) < 72 or head[:4] != MAGIC:
        raise ImageError("format is 'qcow2' but the data has no qcow2 header")
    version, backing_offset, backing_size = struct.unpack_from(">IQI", head, 4)
    crypt_method = struct.unpack_from(">I", head, 32)[0]
    if version not in (2, 3):
        raise ImageError(f"qcow2 version {version} is not read (only 2 and 3)")
    if backing_offset or backing_size:
        raise ImageError("the qcow2 image names a backing file: refused, a qcow2 image must "
                         "hold all of its data (the backing file would be read from the "
                         "machine that converts it)")
    if crypt_method:
        raise ImageError("the qcow2 image is encrypted: not supported")
    if version == 3 and len(head) < 104:
        raise ImageError("the qcow2 header is cut short")
    incompatible = struct.unpack_from(">Q", head, 72)[0] if version == 3 else 0
    if incompatible & DATA_FILE_BIT:
        raise ImageError("the qcow2 image keeps its data in an external data file: refused, "
                         "a qcow2 image must hold all of its data")
    if incompatible & ~SAFE_INCOMPATIBLE:
        raise ImageError(f"the qcow2 image has incompatible features {incompatible:#x} that "
                         f"are not known to be safe to read")


def info(runner, path):
    """qemu-img's view of path, refused unless it is a self-contained qcow2."""
    check_header(path)
    try:
        res = runner.run([*LIMITS, "qemu-img", "info", "-f", "qcow2", "--output=json", path],
                         timeout=INFO_SECONDS)
    except CommandError as exc:
        last = (exc.stderr.strip().splitlines() or [exc.reason or "no reason given"])[-1]
        raise ImageError(f"qemu-img cannot read the image as qcow2: {shown(last)}") from None
    try:
        found = json.loads(res.stdout)
    except ValueError:
        raise ImageError("qemu-img info printed no JSON for the image") from None
    specific = found.get("format-specific") or {}
    if found.get("format") != "qcow2" or specific.get("type") != "qcow2":
        raise ImageError(f"the image was declared qcow2 but qemu-img reads it as "
                         f"{shown(found.get('format'))}")
    backing = found.get("backing-filename") or found.get("full-backing-filename")
    if backing:
        raise ImageError(f"the qcow2 image names a backing file {shown(backing)}: refused, a "
                         f"qcow2 image must hold all of its data")
    data_file = (specific.get("data") or {}).get("data-file")
    if data_file:
        raise ImageError(f"the qcow2 image keeps its data in an external data file "
                         f"{shown(data_file)}: refused, a qcow2 image must hold all of its data")
    return found


def head(runner, path, size, tmp_dir=None):
    """The first size bytes of the disk the qcow2 at path holds (its partition table), read
    by qemu-img dd under the same limits as info(); run info() on path first."""
    with tempfile.TemporaryDirectory(prefix="provision-qcow2-head-", dir=tmp_dir) as where:
        out = os.path.join(where, "head.raw")
        try:
            runner.run([*LIMITS, "qemu-img", "dd", "-f", "qcow2", "-O", "raw", f"bs={size}",
                        "count=1", f"if={source_name(path)}", f"of={out}"],
                       timeout=INFO_SECONDS)
        except CommandError as exc:
            last = (exc.stderr.strip().splitlines() or [exc.reason or "no reason given"])[-1]
            raise ImageError(f"qemu-img cannot read the qcow2 image's first {size} bytes: "
                             f"{shown(last)}") from None
        with open(out, "rb") as f:
            return f.read(size)


def source_name(path):
    """The name qemu-img convert opens path by: qcow2 on a plain file, with no backing file."""
    return "json:" + json.dumps({"driver": "qcow2", "backing": None,
                                 "file": {"driver": "file", "filename": path}})
