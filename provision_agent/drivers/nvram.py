"""UEFI boot entries in the firmware's NVRAM (efibootmgr): grub's, and the one a whole-disk
image's own loader gets.

An entry made again on a re-deploy would pile up beside the last one (firmware keeps every
entry it is given), so an entry with the same label goes first, as ironic-python-agent does,
unless it starts a partition that is on a disk this run did not write: that one boots
something the plan does not name, and stays.
"""

import logging
import os
import re
import tempfile

from provision_agent.drivers import esp_loader, partitions, udev
from provision_agent.errors import ImageError
from provision_agent.plan.devnames import partition_device, partition_number

LOG = logging.getLogger(__name__)

EFIVARS = "/sys/firmware/efi/efivars"
ESP_TYPES = ("c12a7328-f81f-11d2-ba4b-00a0c93ec93b", "ef")
MAX_ENTRIES = 1024          # Boot#### is four hex digits
_ENTRY = re.compile(r"Boot([0-9A-Fa-f]{4})\*? ([^\t]*)\t?(.*)")
_HD = re.compile(r"HD\((\d{1,3}),(GPT|MBR),([0-9A-Fa-fx-]{1,40}),")


def efi_booted(efivars=EFIVARS):
    return os.path.isdir(efivars)


def listed(runner):
    """[(number, label, partition UUID or None)] of the firmware's boot entries."""
    res = runner.run(["efibootmgr", "-v"], check=False, timeout=60)
    found = []
    for line in res.stdout.splitlines()[:MAX_ENTRIES + 16]:
        m = _ENTRY.fullmatch(line.strip())
        if not m:
            continue
        hd = _HD.search(m.group(3))
        uuid = None
        if hd and hd.group(2) == "GPT":
            uuid = hd.group(3).lower()
        elif hd:
            try:
                uuid = f"{int(hd.group(3), 16):08x}-{int(hd.group(1)):02x}"
            except ValueError:
                pass
        found.append((m.group(1), m.group(2).strip(), uuid))
    return found


def partuuids_elsewhere(disks, by_partuuid="/dev/disk/by-partuuid",
                        sys_block="/sys/class/block"):
    """The partition UUIDs this machine shows on disks other than `disks`."""
    ours = {os.path.basename(os.path.realpath(d)) for d in disks}
    found = set()
    try:
        names = os.listdir(by_partuuid)[:4096]
    except OSError:
        return found
    for name in names:
        dev = os.path.basename(os.path.realpath(os.path.join(by_partuuid, name)))
        parent = os.path.basename(os.path.dirname(os.path.realpath(os.path.join(sys_block,
                                                                                 dev))))
        if parent not in ours:
            found.add(name.lower())
    return found


def write_entries(runner, wanted, disks, check=False):
    """wanted: [(disk, partition number, label, loader path)], first to boot first. disks:
    the disks this run wrote. check: a failed efibootmgr fails the run (else it is logged)."""
    if not wanted:
        return
    labels = {label for _, _, label, _ in wanted}
    elsewhere = partuuids_elsewhere(disks)
    for number, label, uuid in listed(runner):
        if label in labels and uuid and uuid not in elsewhere:
            LOG.info("nvram: Boot%s %r goes: an entry of the same name is made again", number,
                     label)
            runner.run(["efibootmgr", "-q", "-b", number, "-B"], check=False, timeout=60)
    # created in reverse: efibootmgr puts each new entry first in BootOrder
    for disk, number, label, loader in reversed(wanted):
        runner.run(["efibootmgr", "-q", "-c", "-d", disk, "-p", str(number), "-L", label,
                    "-l", loader], check=check, timeout=60)


def _esp_partition(runner, disk):
    """(number, device) of the first EFI system partition in disk's table, the kernel made to
    show it; None when the table has none."""
    table = partitions.read_table(runner, disk)
    parts = (table or {}).get("partitions", [])
    esp = next((p for p in parts if str(p.get("type", "")).lower() in ESP_TYPES), None)
    if esp is None:
        return None
    number = partition_number(esp["node"])
    k = table.get("sectorsize", 512) // 512     # sysfs counts 512-byte units
    expected = {partition_number(p["node"]): (p["start"] * k, p["size"] * k) for p in parts}
    udev.reread_partitions(runner, disk, expected)
    device = udev.partition_node(disk, number) or partition_device(disk, number)
    udev.wait_for_devices(runner, [device])
    return number, device


def _loader_on(runner, device):
    staging = tempfile.mkdtemp(prefix="provision-esp-")
    try:
        # the image's filesystem: read-only, nothing on it runs or opens a device
        runner.run(["mount", "-t", "vfat", "-o", "ro,nosuid,nodev,noexec", device, staging],
                   timeout=60)
        try:
            return esp_loader.find(staging)
        finally:
            runner.run(["umount", staging], timeout=60)
    finally:
        os.rmdir(staging)


def image_entries(runner, mode, disks):
    """After whole-disk images, in UEFI mode: an entry for the loader on each disk's ESP."""
    if mode != "uefi":
        LOG.info("bootloader: BIOS mode: the image's own boot code starts %s",
                 ", ".join(disks))
        return
    if not efi_booted():
        LOG.warning("bootloader: this ramdisk did not boot in UEFI mode, so the firmware's "
                    "NVRAM cannot be written: %s gets no boot entry", ", ".join(disks))
        return
    wanted, needed = [], False
    for disk in disks:
        found = _esp_partition(runner, disk)
        if found is None:
            raise ImageError(f"the whole-disk image on {disk} has no EFI system partition: "
                             "it cannot boot in UEFI mode (the boot mode asked for)")
        number, device = found
        loader = _loader_on(runner, device)
        if loader is None:
            # as ironic-python-agent: an empty ESP is the image's business, not a failure
            LOG.warning("bootloader: the ESP %s of the whole-disk image holds no loader "
                        "(EFI/*/BOOTX64.CSV, EFI/BOOT/BOOTX64.EFI, shimx64.efi, grubx64.efi, "
                        "bootmgfw.efi): no boot entry", device)
            continue
        LOG.info("bootloader: boot entry %r for %s on %s (%s)", loader.label, loader.path,
                 device, loader.why)
        wanted.append((disk, number, loader.label, loader.path))
        needed = needed or not loader.removable
    # only an entry the image cannot boot without may fail the run
    write_entries(runner, wanted, disks, check=needed)
