"""The executor's steps for the image and the installed system: the image written, the target
mounted, the bootloader, the configdrive, the unmount."""

import logging

from provision_agent.drivers import blockinfo, partitions, udev
from provision_agent.plan.devnames import partition_device

LOG = logging.getLogger(__name__)

# where the installed system's kernels and boot loaders live (see mount_step)
BOOT_MOUNTS = ("/boot", "/boot/efi")


def handlers(executor):
    """kind -> handler(step) for the executor's table."""
    return {"write_image": lambda step: write_image(executor, step),
            "mount": lambda step: mount_step(executor, step),
            "bootloader": lambda step: bootloader(executor, step),
            "configdrive": lambda step: configdrive(executor, step),
            "umount": lambda step: umount(executor, step)}


def write_image(executor, step):
    from provision_agent.drivers.images import formats, write_step  # heavy; images only
    appended = step.device in executor.appended
    result = write_step.write_image(step.args, runner=executor.runner, events=executor.events,
                                    target_root=executor.root, options=executor.options,
                                    table_follows=appended)
    if step.format == "qcow2" and step.device in executor.wiped and not appended:
        # a whole disk, wiped without a re-read (the executor's do_wipe): the writer re-reads
        # the table only after a disk-format image
        formats.reread_partitions(executor.runner, step.device)
    return result


def mount_step(executor, step):
    # what the image put at the mount point goes into a filesystem made by this run, and
    # into a kept /boot or ESP (the new system's kernels and loaders belong there, or grub
    # would boot the old ones); a kept data filesystem gets nothing of the image's
    made_here = any(fs["device"] == step.device for fs in executor.filesystems)
    return {"path": executor.mounts.mount(step.device, step.mount_point, step.fs_type,
                                          adopt=made_here or step.mount_point in BOOT_MOUNTS)}


def bootloader(executor, step):
    from provision_agent.drivers import bootloader as loader
    return loader.install_report(executor.runner, executor.root,
                                 without_lost_disks(step.args, executor.faults))


# the bootloader step's disk lists: where grub goes, and the partitions an ESP is copied to
BOOT_DISK_LISTS = ("targets", "uefi_targets", "esp_copies")


def without_lost_disks(args, faults):
    """The bootloader step's args without the disks that lost an array member during the run
    (on_member_failure: degrade, run/faults.py): such a disk fails writes, and boot code on it
    would let the firmware start from the disk whose copy of the system is stale (its old
    member still says it is in the array); a bad spot where grub goes would fail the run the
    policy let go on. When every target lost one, the args stay as they are."""
    lost = [x["disk"] for x in getattr(faults, "lost", None) or []]
    if not lost:
        return args
    from provision_agent.run import faults as fault_watch
    knames = {fault_watch.kernel_name(d) for d in lost}
    out = dict(args)
    for key in BOOT_DISK_LISTS:
        devices = args.get(key)
        if not devices:
            continue
        kept = [d for d in devices if not fault_watch.on_disks(d, knames)]
        if kept or key == "esp_copies":
            out[key] = kept
        if len(kept) < len(devices):
            LOG.warning("bootloader: leaving out %s (%s): %s lost an array member during this "
                        "run and fails writes; the machine boots from the other disks",
                        ", ".join(d for d in devices if d not in kept), key, ", ".join(lost))
    return out


def configdrive(executor, step):
    from provision_agent.drivers import configdrive as drive
    args = step.args
    if step.append_to:
        disk = step.append_to
        number, table = partitions.append_at_end(executor.runner, disk, step.size_bytes,
                                                 blockinfo.size_bytes(disk),
                                                 name="config-2")
        udev.reread_partitions(executor.runner, disk, table)
        device = partition_device(step.partitions_of or disk, number)
        udev.wait_for_devices(executor.runner, [device])
        args = dict(args, device=device)
    return {"device": args["device"],
            "bytes": drive.write(executor.runner, args, executor.options)}


def umount(executor, step):
    executor.runner.run(["sync"])
    for mount_point in step.mount_points:
        executor.mounts.umount(mount_point)
