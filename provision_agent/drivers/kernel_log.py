"""The kernel's log since the run started: where a disk's I/O errors show, whatever the tool
that met them printed (an image writer's EIO, mkfs's "Input/output error") or did not (md
retrying a failed write elsewhere, a lost async page write).

Read with `dmesg --raw` (util-linux) through the runner, bounded: the ring buffer's own size,
the last MAX_LINES lines of it, a timeout. What is new is what follows the last line seen at
the previous read, matched by its text (timestamp included), so that a log without printk
timestamps works too; a mark that fell out of the ring buffer makes the whole buffer new.
"""

import logging
import re
from dataclasses import dataclass

LOG = logging.getLogger(__name__)

MAX_LINES = 20000
TIMEOUT = 30
# "<3>[   52.636408] I/O error, dev vdb, sector 21888 op 0x1:(WRITE) flags 0x0 ..."
_RAW = re.compile(r"<(\d{1,4})>(?:\[\s*(\d{1,10}\.\d{1,9})\] ?)?(.*)")
# the block layer's request errors (blk_print_req_error; older kernels prefix
# "blk_update_request: "), named by the status: "I/O error", "critical medium error", ...
_IO_ERROR = re.compile(r"(?:I/O|critical medium|critical target|critical nexus|critical "
                       r"space allocation|critical protection|recoverable transport|timeout) "
                       r"error, dev ([A-Za-z0-9_!.-]{1,32}), sector (\d{1,20})"
                       r"(?: op 0x[0-9a-f]{1,8}:\(([A-Z_]{1,24})\))?")
# fs/buffer.c: a write or read through the page cache that failed
_BUFFER_ERROR = re.compile(r"Buffer I/O error on dev ([A-Za-z0-9_!.-]{1,32}), logical block "
                           r"(\d{1,20})")
# md: a member md gave up on ("md/raid1:md127: Disk failure on vdb1, disabling device.")
_MD_FAILURE = re.compile(r"md/raid\d{0,2}:(md[A-Za-z0-9_]{1,32}): Disk failure on "
                         r"([A-Za-z0-9_!.-]{1,32}), disabling device")


# A discard or write-zeroes a device refuses (some SCSI disks answer UNMAP or WRITE SAME with
# "critical target error") loses no data: the kernel stops sending them, zeroing falls back to
# writes, and blkdiscard's own exit says it to its caller (drivers/wipe.py).
IGNORED_OPS = ("DISCARD", "WRITE_ZEROES", "SECURE_ERASE")


@dataclass(frozen=True)
class Entry:
    level: int
    seconds: float | None
    message: str


@dataclass(frozen=True)
class DeviceError:
    """One line that says a device failed I/O: `device` a kernel name (vdb, vdb1, sda),
    `sector` 512-byte units from the device's start (None when the line gives none), `op`
    WRITE / READ / ... when given, `array` the md array for an md member failure."""
    device: str
    sector: int | None
    op: str | None
    line: str
    array: str | None = None


def parse(text):
    """The Entries of `dmesg --raw` output; lines without a level prefix (continuations) are
    added to the entry before them."""
    entries = []
    for line in text.splitlines()[-MAX_LINES:]:
        m = _RAW.fullmatch(line)
        if m:
            seconds = float(m.group(2)) if m.group(2) else None
            entries.append(Entry(int(m.group(1)) & 7, seconds, m.group(3).strip()))
        elif entries and line.strip():
            last = entries.pop()
            entries.append(Entry(last.level, last.seconds, f"{last.message} {line.strip()}"))
    return entries


def device_errors(entries):
    """Every DeviceError the entries report, in log order (but IGNORED_OPS')."""
    found = []
    for entry in entries:
        msg = entry.message
        m = _IO_ERROR.search(msg)
        if m:
            if m.group(3) not in IGNORED_OPS:
                found.append(DeviceError(m.group(1), int(m.group(2)), m.group(3), msg))
            continue
        m = _BUFFER_ERROR.search(msg)
        if m:
            found.append(DeviceError(m.group(1), None, None, msg))
            continue
        m = _MD_FAILURE.search(msg)
        if m:
            found.append(DeviceError(m.group(2), None, None, msg, array=m.group(1)))
    return found


class KernelLog:
    """The kernel log read in pieces: `new()` returns the entries logged since the previous
    call (or since this object was made)."""

    def __init__(self, runner):
        self.runner = runner
        self._mark = None
        self.available = True
        lines = self._lines()
        self._mark = lines[-1] if lines else ""

    def _lines(self):
        if not self.available:
            return []
        res = self.runner.run(["dmesg", "--raw"], check=False, timeout=TIMEOUT)
        if res.returncode != 0:
            # no kernel log to read (dmesg_restrict, no dmesg): the tools' own errors and
            # md's sysfs are then all there is; said once
            LOG.warning("the kernel log cannot be read (dmesg exited %s: %s); disk errors are "
                        "seen only through the tools and md", res.returncode,
                        res.stderr.strip()[:200])
            self.available = False
            return []
        return res.stdout.splitlines()[-MAX_LINES:]

    def new(self):
        lines = self._lines()
        if not lines:
            return []
        start = 0
        if self._mark:
            # the last occurrence of the mark: a line repeated later is new again
            for index in range(len(lines) - 1, -1, -1):
                if lines[index] == self._mark:
                    start = index + 1
                    break
            else:
                LOG.info("the kernel log wrapped since it was last read; all of it is read")
        self._mark = lines[-1]
        return parse("\n".join(lines[start:]))
