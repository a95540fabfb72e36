"""The last check before the first write: does the live machine still match the plan?

A plan may have been made from a recorded inventory, or the machine may have changed since.
Everything here only reads. Problems exit 3 (MachineMismatch) with nothing written.
"""

import logging
import os

from provision_agent.drivers import blockinfo, bootloader, lvm, md, partitions
from provision_agent.errors import MachineMismatch, Problem
from provision_agent.machine import crypt_needs, spanning
from provision_agent.plan import geometry, inventory, parttypes

LOG = logging.getLogger(__name__)


def _where(layout, disk_id):
    for disk in layout.disks:
        if disk.id == disk_id:
            return disk.origin or f"disk {disk_id}"
    return f"disk {disk_id}"


# Labels of the media a ramdisk boots from: Ironic's virtual media ISO and its parameter floppy.
BOOT_MEDIUM_LABELS = {"VMEDIA_BOOT_ISO", "ir-vfd-dev"}


def _named(layout, disk_id):
    """Whether the input names this disk. Hints a program picked from an inventory (the RAID
    interface's "every disk") name nothing: a USB stick in that inventory has a serial too."""
    for disk in layout.disks:
        if disk.id == disk_id:
            # size or rotational alone could pick up a stick that happens to fit
            return not disk.from_inventory and inventory.names_a_disk(disk.hints)
    return False


def in_use(runner, disk, mounted, swaps, tree=None):
    """Why disk must not be written to (something on it is mounted or swapping, or it holds the
    medium this ramdisk booted from), or []. tree: the disk's blockinfo tree, if read already."""
    nodes = [tree or blockinfo.tree(runner, disk)]
    nodes += blockinfo.descendants(nodes[0])
    paths = {disk} | {n["path"] for n in nodes[1:]}
    real = {os.path.realpath(p) for p in paths}
    reasons = []
    for source, where in mounted.items():
        if source in paths or os.path.realpath(source) in real:
            reasons.append(f"{source} is mounted at {where}")
    for swap in swaps:
        if swap in paths or os.path.realpath(swap) in real:
            reasons.append(f"{swap} is in use as swap")
    for node in nodes:
        if node.get("label") in BOOT_MEDIUM_LABELS:
            reasons.append(f"{node.get('path', disk)} is labelled {node['label']}: the medium "
                           f"a ramdisk boots from")
    return reasons


def check(planned, live_disks, runner, mounted=None, swaps=None):
    res = planned.resolved
    mounted = blockinfo.mounted_sources() if mounted is None else mounted
    swaps = blockinfo.active_swaps() if swaps is None else swaps
    live = {d["name"]: d for d in live_disks}
    present = [w["name"] for w in res.disks.values() if w["name"] in live]
    # one lsblk for all of them: each call costs start-up (benchmarks/layouts_vs_shell.md)
    trees = dict(zip(present, blockinfo.trees(runner, present))) if present else {}
    problems = []
    for disk_id, want in res.disks.items():
        where, name = _where(res.layout, disk_id), want["name"]
        have = live.get(name)
        if have is None:
            problems.append(Problem(where, f"{name} is not present on this machine"))
            continue
        if have["size"] < want["size"]:
            problems.append(Problem(where, f"{name} has {have['size']} bytes, the plan was made "
                                           f"for {want['size']}"))
        problems += [Problem(where, p) for p in _block_sizes(name, want, have)]
        if want.get("serial") and have.get("serial") and want["serial"] != have["serial"]:
            problems.append(Problem(where, f"{name} has serial {have['serial']}, the plan was "
                                           f"made for serial {want['serial']}"))
        if have.get("read_only"):
            problems.append(Problem(where, f"{name} is read-only"))
        if inventory.left_alone(have) and not have.get("read_only") \
                and not _named(res.layout, disk_id):
            problems.append(Problem(where, f"{name} is {inventory.left_alone(have)}: name it "
                                           f"by serial, wwn, path or name in the input to "
                                           f"write it"))
        for reason in in_use(runner, name, mounted, swaps, trees.get(name)):
            problems.append(Problem(where, f"{name} is in use: {reason}"))
    planned_disks = {want["name"] for want in res.disks.values()}
    problems += [Problem(_where(res.layout, disk_id), msg) for disk_id, msg in
                 _ids(res, spanning.problems(runner, trees, planned_disks))]
    problems += _kept_partitions(planned.steps, runner)
    problems += _kept_mounts(planned.steps, runner)
    problems += [Problem(f"volume group {step.args['name']}", msg) for step in planned.steps
                 if step.kind == "vg_activate" for msg in lvm.kept_vg_problems(runner, step.args)]
    problems += [Problem(f"raid {step.args['name']}", msg) for step in planned.steps
                 if step.kind == "md_assemble" for msg in md.kept_array_problems(runner,
                                                                                 step.args)]
    problems += _name_clashes(planned.steps, runner, planned_disks)
    problems += [Problem(f"encrypted volume {name}", msg)
                 for name, msg in crypt_needs.problems(planned.steps)]
    problems += [Problem("bootloader", "secure_boot needs UEFI, but this machine booted the "
                                       "ramdisk in BIOS mode and the layout says boot_mode auto")
                 for step in planned.steps if step.kind == "bootloader"
                 and step.args.get("secure_boot")
                 and bootloader.boot_mode(step.args.get("boot_mode") or "auto") != "uefi"]
    problems += _bios_on_4kn(planned.steps, live)
    problems += _bios_grub_on_auto(planned.steps)
    problems += _uefi_on_auto(planned.steps)
    if problems:
        raise MachineMismatch(problems)
    LOG.info("preflight: %d disk(s) present, large enough and not in use", len(res.disks))


def _ids(res, found):
    """[(disk id, message)] of [(disk name, message)]."""
    ids = {want["name"]: disk_id for disk_id, want in res.disks.items()}
    return [(ids[name], msg) for name, msg in found]


def _block_sizes(name, want, have):
    """The tables are written in the disk's logical sectors and aligned to its physical
    blocks: a plan made for other ones (a recorded inventory of another disk) is refused."""
    (logical, physical, recorded), (live, live_physical, _) = (inventory.block_sizes(want),
                                                                inventory.block_sizes(have))
    said = "" if recorded else " (assumed: its inventory did not record them)"
    if live != logical:
        return [f"{name} has {live}-byte logical sectors, the plan was made for {logical}{said}: "
                f"plan again against this machine's inventory"]
    if geometry.alignment(logical, physical) % live_physical:
        return [f"{name} has {live_physical}-byte physical blocks, the plan aligns partitions "
                f"to {geometry.alignment(logical, physical)} bytes{said}: plan again against "
                f"this machine's inventory"]
    return []


def _bios_on_4kn(steps, live):
    """boot_mode auto is known only here: a machine that booted the ramdisk in BIOS mode
    cannot boot a disk of larger logical sectors than 512 (plan/blocks.py says why and
    refuses boot_mode bios at plan time)."""
    return [Problem("bootloader", f"this machine booted the ramdisk in BIOS mode (the layout "
                                  f"says boot_mode auto), and BIOS cannot boot {t}, a disk of "
                                  f"{live[t]['logical_block_size']}-byte logical sectors "
                                  f"(4Kn): boot the machine in UEFI mode, or put the "
                                  f"bootloader on a disk of 512-byte logical sectors")
            for step in steps if step.kind == "bootloader"
            and step.args.get("type") == "grub2"
            and (step.args.get("boot_mode") or "auto") == "auto"
            and bootloader.boot_mode("auto") == "bios"
            for t in step.args.get("targets") or []
            if live.get(t, {}).get("logical_block_size", 512) > 512]


def _bios_grub_on_auto(steps):
    """boot_mode auto found a BIOS machine: each grub target on a GPT table needs a bios_grub
    partition for grub's core image, as validation asks of boot_mode bios
    (plan/validate_boot.py); grub-install would fail only after the disks were written."""
    grub = [s for s in steps if s.kind == "bootloader" and s.args.get("type") == "grub2"
            and (s.args.get("boot_mode") or "auto") == "auto"]
    if not grub or bootloader.boot_mode("auto") != "bios":
        return []
    gpt = {s.args["disk"] for s in steps
           if s.kind == "partition_table" and s.args["label"] == "gpt"}
    room = {s.args["disk"] for s in steps if s.kind == "partition"
            and str(s.args.get("type")).upper() == parttypes.GPT_TYPES["bios_grub"]}
    return [Problem("bootloader", f"this machine booted the ramdisk in BIOS mode (the layout "
                                  f"says boot_mode auto), and {t} has a gpt table without a "
                                  f"bios_grub partition, where grub's BIOS boot code goes: add "
                                  f"one to that disk, boot the machine in UEFI mode, or name "
                                  f"the disks that boot in targets")
            for step in grub for t in step.args.get("targets") or []
            if t in gpt and t not in room]


def _uefi_on_auto(steps):
    """boot_mode auto found a UEFI machine: the step installs on its UEFI targets (a / on an
    array's partition boots from the ESPs, not from the members), and those are checked as
    validation checks boot_mode uefi's (plan/validate_boot.py): an ESP on each, one mounted at
    /boot/efi. grub-install would fail only after the disks were written."""
    grub = [s for s in steps if s.kind == "bootloader" and s.args.get("type") == "grub2"
            and (s.args.get("boot_mode") or "auto") == "auto"]
    if not grub or bootloader.boot_mode("auto") != "uefi":
        return []
    esp = {s.args["disk"] for s in steps if s.kind == "partition"
           and str(s.args.get("type")).upper() in (parttypes.GPT_TYPES["esp"],
                                                   parttypes.MBR_TYPES["esp"].upper())}
    said = "this machine booted the ramdisk in UEFI mode (the layout says boot_mode auto)"
    problems = [Problem("bootloader", f"{said}, and {t} has no esp partition, where UEFI "
                                      f"firmware finds grub: add one to that disk, or name the "
                                      f"disks that boot in targets")
                for step in grub for t in bootloader.targets_for(step.args, "uefi")
                if t not in esp]
    if not any(s.kind == "mount" and s.args.get("mount_point") == "/boot/efi" for s in steps):
        problems.append(Problem("bootloader", f"{said}, and no vfat filesystem is mounted at "
                                              f"/boot/efi, where grub-install puts its EFI "
                                              f"loader: add an esp partition with one"))
    return problems


def _kept_partitions(steps, runner):
    problems, tables = [], {}
    for step in steps:
        if step.kind != "partition" or not step.args.get("keep"):
            continue
        disk = step.args["disk"]
        if disk not in tables:
            tables[disk] = partitions.read_table(runner, disk)
        msg = partitions.check_kept(tables[disk], step.args)
        if msg:
            problems.append(Problem(disk, msg))
    return problems


def _kept_mounts(steps, runner):
    """A kept partition the plan mounts (a kept /, /boot/efi...) must hold the filesystem the
    layout says: the mount comes after the tables are edited, and a kept / that holds none, or
    another type, would stop the run there. (A kept volume group's logical volumes are checked
    when their mount runs: they appear only once the group is activated.)"""
    kept = {s.args["device"] for s in steps if s.kind == "partition" and s.args.get("keep")}
    kept -= {s.args["device"] for s in steps if s.kind == "wipe_contents"}     # made anew
    problems = []
    for step in steps:
        if step.kind != "mount" or step.args["device"] not in kept:
            continue
        device, want = step.args["device"], step.args.get("fs_type")
        have = blockinfo.fs_type(runner, device)
        if want and want != "auto" and have != want:
            problems.append(Problem(device, (
                f"the kept filesystem for {step.args['mount_point']} is {have}" if have else
                f"the kept partition for {step.args['mount_point']} holds no filesystem")
                + f", the layout says {want}: correct its type in the layout, or do not keep "
                  f"it"))
    return problems


def _name_clashes(steps, runner, planned_disks):
    """A VG or md array the plan creates whose name is taken by one living partly on a disk the
    plan does not name: wiping our disks cannot free the name, and clearing the other disk is
    not ours to do, so the create step would fail halfway through the run."""
    vg_names = {s.args["name"] for s in steps if s.kind == "vg_create"}
    md_names = {s.args["name"] for s in steps if s.kind == "md_create" and s.args.get("name")}
    problems = []
    for pv in lvm.physical_volumes(runner) if vg_names else ():    # no VG made, no clash
        if pv.get("vg_name") in vg_names and pv["pv_name"].startswith("/dev/"):
            others = set(blockinfo.disks_under(runner, pv["pv_name"])) - planned_disks
            if others:
                problems.append(Problem(
                    f"volume group {pv['vg_name']}",
                    f"the name is taken by an existing volume group with physical volume "
                    f"{pv['pv_name']} on {', '.join(sorted(others))}, which this plan does not "
                    f"touch; rename the volume group in the input, or clear that disk first"))
    for name in sorted(md_names):
        existing = f"/dev/md/{name}"
        if os.path.exists(existing):
            others = set(blockinfo.disks_under(runner, existing)) - planned_disks
            if others:
                problems.append(Problem(
                    f"raid {name}",
                    f"{existing} already exists with members on {', '.join(sorted(others))}, "
                    f"which this plan does not touch; rename the array in the input, or stop "
                    f"and clear it first"))
    return problems
