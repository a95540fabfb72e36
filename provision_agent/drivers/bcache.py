"""bcache: make-bcache (bcache-tools) writes the superblocks; the kernel's sysfs registers the
devices, attaches a backing device to its cache set, sets the cache mode and the label, and
stops them before a wipe.

The kernel numbers a bcache device (/dev/bcacheN) as it registers it, so nothing guesses N: it
is read from the backing device's sysfs (`bcache/dev`, a link to the bcache disk). A plan
names the device by its label's link, /dev/bcache/by-label/NAME: bcache-tools' udev rule makes
it when the label is set, and create() makes it where udev did not.
"""

import logging
import os
import time

from provision_agent.drivers import udev
from provision_agent.errors import MachineMismatch, Problem
from provision_agent.plan.devnames import partition_number

LOG = logging.getLogger(__name__)

BY_LABEL = "/dev/bcache/by-label/"
SYS_BLOCK = "/sys/class/block"
SYS_FS = "/sys/fs/bcache"
# registration and stopping are asynchronous in the kernel; a device that takes longer than
# this is reported, not waited for
WAIT = 30.0
POLL = 0.2


def make_argv(kind, device, block_size):
    """make-bcache for a cache (`-C`) or a backing (`-B`) device; --wipe-bcache writes over a
    bcache superblock a wipe left (make-bcache refuses one otherwise)."""
    return ["make-bcache", "-C" if kind == "cache" else "-B", "--block", str(block_size),
            "--wipe-bcache", device]


def _kname(device):
    return os.path.basename(os.path.realpath(device))


def _wait(what, ready, clock=time.monotonic, sleep=time.sleep):
    deadline = clock() + WAIT
    while not ready():
        if clock() > deadline:
            raise MachineMismatch([Problem("bcache", f"{what} within {WAIT:.0f} s")])
        sleep(POLL)


def _write(path, value):
    with open(path, "w") as f:
        f.write(value)


def register(device, sys_block=SYS_BLOCK, sys_fs=SYS_FS, **timing):
    """Register device with the kernel unless udev's rule already did; wait until it is (udev
    may be registering it at the same time: the kernel then refuses ours as busy)."""
    here, said = os.path.join(sys_block, _kname(device), "bcache"), ""
    if not os.path.isdir(here):
        try:
            _write(os.path.join(sys_fs, "register"), device)
        except OSError as exc:
            said = f" (the kernel refused it: {exc})"
    _wait(f"{device} was not registered{said}", lambda: os.path.isdir(here), **timing)
    return here


def create(runner, args, sys_block=SYS_BLOCK, sys_fs=SYS_FS, **timing):
    """The bcache_create step: returns {"kernel_device": "/dev/bcacheN"}."""
    cache, backing, block = args.get("cache"), args["backing"], args["block_size"]
    runner.run(["modprobe", "bcache"])      # init loads it; /sys/fs/bcache needs it
    if cache and args.get("format_cache"):
        runner.run(make_argv("cache", cache, block))
    runner.run(make_argv("backing", backing, block))
    runner.run(["udevadm", "settle", "--timeout=30"], check=False)
    if cache:
        joined = os.path.join(register(cache, sys_block, sys_fs, **timing), "set")
        _wait(f"{cache} joined no cache set", lambda: os.path.islink(joined), **timing)
        cset = os.path.basename(os.path.realpath(joined))
    here = register(backing, sys_block, sys_fs, **timing)
    link = os.path.join(here, "dev")
    _wait(f"{backing} shows no bcache device", lambda: os.path.islink(link), **timing)
    kname = _kname(link)
    control = os.path.join(sys_block, kname, "bcache")
    if cache:
        if not os.path.exists(os.path.join(here, "cache")):
            _write(os.path.join(control, "attach"), cset)
        _write(os.path.join(control, "cache_mode"), args["cache_mode"])
    _write(os.path.join(control, "label"), args["name"])
    ensure_link(args["device"], f"/dev/{kname}")
    LOG.info("bcache: %s is /dev/%s on %s%s", args["device"], kname, backing,
             f", cache set {cset} on {cache} ({args['cache_mode']})" if cache else "")
    return {"kernel_device": f"/dev/{kname}"}


def ensure_link(link, target):
    """link -> target, made (or corrected) where udev has not made it yet."""
    if os.path.realpath(link) == os.path.realpath(target):
        return
    os.makedirs(os.path.dirname(link), exist_ok=True)
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(target, link)


def link_partitions(runner, disk, devices, sys_block=SYS_BLOCK):
    """Link the plan's names of a bcache device's partitions (NAME1, NAMEp1 beside its label's
    link) to the kernel's (/dev/bcacheNpM): no udev rule names them by the label."""
    for device in (d for d in devices if d.startswith(disk) and d != disk):
        number = partition_number(device)
        node = udev.partition_node(disk, number, sys_block)
        if node is None:
            udev.settle(runner)
            node = udev.partition_node(disk, number, sys_block)
        if node is None:
            raise udev.DeviceMissing(f"{disk} shows no partition {number} after its table "
                                     f"was written")
        ensure_link(device, node)


def is_bcache(node):
    """Whether an lsblk node is a bcache device (lsblk calls it a disk)."""
    return os.path.basename(node.get("path") or "").startswith("bcache") \
        and node.get("type") == "disk"


def stop_device(device, sys_block=SYS_BLOCK, **timing):
    """Stop the bcache device (/dev/bcacheN): its backing device is free, its data stays."""
    kname = _kname(device)
    gone = os.path.join(sys_block, kname)
    if not os.path.exists(gone):
        return
    LOG.info("bcache: stopping %s", device)
    _write(os.path.join(gone, "bcache", "stop"), "1")
    _wait(f"{device} did not stop", lambda: not os.path.exists(gone), **timing)


def stop_backing(device, sys_block=SYS_BLOCK, **timing):
    """Stop the bcache device registered on the backing `device`, if one is (a run that
    stopped on a fault, before its step made the label's link): its data stays."""
    here = os.path.join(sys_block, _kname(device), "bcache")
    if not os.path.isdir(here):
        return
    LOG.info("bcache: stopping the bcache device on %s", device)
    _write(os.path.join(here, "stop"), "1")
    _wait(f"the bcache device on {device} did not stop", lambda: not os.path.exists(here),
          **timing)


def stop_set(device, sys_block=SYS_BLOCK, **timing):
    """Stop the cache set registered on device (a cache device), if one is."""
    link = os.path.join(sys_block, _kname(device), "bcache", "set")
    if not os.path.exists(link):
        return
    cset = os.path.realpath(link)
    LOG.info("bcache: stopping cache set %s on %s", os.path.basename(cset), device)
    _write(os.path.join(cset, "stop"), "1")
    _wait(f"cache set {os.path.basename(cset)} on {device} did not stop",
          lambda: not os.path.exists(cset), **timing)


def has_boot_support(root_exists):
    """[] when the image assembles bcache devices at boot, else the Debian packages it lacks:
    bcache-tools' udev rule registers them, its initramfs hook (or dracut's bcache module)
    puts that rule into the initramfs. root_exists(path) looks in the image."""
    rule = any(root_exists(p) for p in ("/usr/lib/udev/rules.d/69-bcache.rules",
                                        "/lib/udev/rules.d/69-bcache.rules"))
    hook = any(root_exists(p) for p in ("/usr/share/initramfs-tools/hooks/bcache",
                                        "/usr/lib/dracut/modules.d/90bcache"))
    return [] if rule and hook else ["bcache-tools"]
