"""Erase that really erases: ironic-python-agent's erase_devices ("full") and
erase_devices_express ("express"), per disk with the strongest method the hardware offers,
after the metadata erase (run/erase.py) has taken down what stood on the disk.

Strongest first:
- nvme_crypto, nvme_user_data: Format NVM with a Secure Erase Setting (drivers/nvme.py),
  unless the controller applies it to every namespace of its subsystem and one of them is
  not being erased (one the operator skipped, one in use, one the host does not see);
- ata_enhanced, ata: ATA SECURITY ERASE UNIT (drivers/ata.py), unless frozen or locked;
- discard: the whole disk discarded, then read back at SAMPLES places: kept only if the disk
  returns zeros there (many do not promise it);
- overwrite ("full" only): `overwrite_passes` passes, the last one zeros, read back the same.
"express" stops before the overwrite, which takes hours: a disk that offers none of the
others keeps the metadata erase alone, as ironic-python-agent's express erase does.
A method that fails or does not verify hands over to the next one; the one that did the
erase is reported per disk (events and the result).
"""

import contextlib
import logging
import os
import threading

from provision_agent.drivers import ata, blockinfo, nvme
from provision_agent.errors import CommandError

LOG = logging.getLogger(__name__)

MODES = ("metadata", "full", "express")
SAMPLES = 16                # places read back after a discard or an overwrite, ends included
SAMPLE_BYTES = 1 << 20
LONG = 48 * 3600            # an overwrite of a large disk takes hours
TICK = 60                   # seconds between progress events while a method runs


def candidates(nvme_caps, ata_state, discards, mode):
    """(the methods to try in order, why stronger ones are not offered). Pure."""
    methods, why = [], []
    if nvme_caps and nvme_caps["format"] and nvme_caps.get("spares"):
        why.append(nvme_caps["spares"])         # the later methods act on this disk alone
    elif nvme_caps and nvme_caps["format"]:
        methods.append("nvme_crypto" if nvme_caps["crypto"] else "nvme_user_data")
    elif nvme_caps is not None:
        why.append("the NVMe controller has no Format NVM")
    reason = ata.usable(ata_state)
    if reason is None:
        methods.append("ata_enhanced" if ata_state["enhanced"] else "ata")
    elif ata_state is not None and ata_state["supported"]:
        why.append(reason)
    if discards:
        methods.append("discard")
    else:
        why.append("no discard")
    if mode == "full":
        methods.append("overwrite")
    return methods, why


def discard_bytes(disk, sys_block="/sys/class/block"):
    try:
        return int(blockinfo.queue_value(disk, "discard_max_bytes", sys_block) or 0)
    except ValueError:
        return 0


def reads_zero(disk, samples=SAMPLES, size=SAMPLE_BYTES):
    """Whether the disk reads as zeros at `samples` places spread over it, both ends included."""
    fd = os.open(disk, os.O_RDONLY)
    try:
        end = os.lseek(fd, 0, os.SEEK_END)
        length = min(size, end)
        step = max(1, (end - length) // max(1, samples - 1))
        for i in range(samples):
            offset = min(i * step, end - length)
            if os.pread(fd, length, offset).count(0) != length:
                return False
        return True
    finally:
        os.close(fd)


@contextlib.contextmanager
def ticking(tick, interval=TICK):
    """Calls tick() every interval seconds until the block ends: an erase runs for hours
    without anything else to report, and Ironic counts silence as a hung clean step."""
    if tick is None:
        yield
        return
    done = threading.Event()

    def loop():
        while not done.wait(interval):
            tick()
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=5)


def erase_disk(runner, disk, mode, passes=1, probe=None, zero_check=reads_zero, tick=None,
               erasing=None):
    """Erase disk by the first method of candidates() that works; returns (method, notes).
    probe: (nvme caps, ata state, discard bytes) for tests; read from the disk otherwise.
    tick: called every TICK seconds while a method runs (a progress event).
    erasing: every disk this erase clears (default: disk alone); a Format NVM that would
    reach a namespace outside it is not used."""
    caps, state, discards = probe or (nvme.capabilities(runner, disk),
                                      ata.security(runner, disk), discard_bytes(disk))
    if caps and caps["format"]:
        caps = dict(caps, spares=nvme.format_spares(runner, disk, caps, erasing or [disk]))
    methods, notes = candidates(caps, state, discards, mode)
    for method in methods:
        try:
            with ticking(tick):
                if _apply(runner, disk, method, passes, state, zero_check):
                    return method, notes
            notes.append(f"{method}: the disk did not read as zeros after it")
        except CommandError as exc:
            notes.append(f"{method} failed: {exc}")
        LOG.warning("%s: %s; trying the next method", disk, notes[-1])
    return "metadata", notes


def _apply(runner, disk, method, passes, state, zero_check):
    LOG.info("%s: erasing by %s", disk, method)
    if method.startswith("nvme_"):
        nvme.format_erase(runner, disk, crypto=method == "nvme_crypto")
        return True
    if method.startswith("ata"):
        ata.security_erase(runner, disk, state)
        return True
    if method == "discard":
        runner.run(["blkdiscard", "--force", disk], timeout=LONG)
        return zero_check(disk)
    if passes > 1:
        runner.run(["shred", "--force", f"--iterations={passes - 1}", disk], timeout=LONG)
    runner.run(["blkdiscard", "--zeroout", "--force", disk], timeout=LONG)
    return zero_check(disk)
