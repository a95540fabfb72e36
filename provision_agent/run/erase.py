"""`provision erase`: clear the metadata of this machine's disks between tenants.

What Ironic's cleaning asks of a ramdisk (ironic-python-agent's erase_devices_metadata): every
disk that could carry the last tenant's layout loses its partition tables (both GPT copies),
md superblocks, LVM labels and filesystem signatures, so that nothing of it is assembled,
activated or mounted again. The data blocks themselves are not overwritten.

The same disks are left alone as in a provisioning run: read-only ones, removable ones (a USB
stick, a card, virtual media), the medium this ramdisk booted from and anything mounted or
swapping. An optional input document {"skip_block_devices": [{hints}, ...]} names more, with
Ironic's root device hints, as the node property of that name does for ironic-python-agent.
Every disk is checked before the first is touched.
"""

import functools
import logging

from provision_agent import errors
from provision_agent.errors import InputError, Problem
from provision_agent.machine import disks as machine_disks
from provision_agent.machine import preflight
from provision_agent.plan import inventory

LOG = logging.getLogger(__name__)

MAX_SKIP_HINTS = 64


KEYS = ("skip_block_devices", "method", "overwrite_passes")
MAX_PASSES = 32


def skip_hints(document):
    """The list of hint dicts in {"skip_block_devices": [...]}; InputError when malformed."""
    if document is None:
        return []
    if not isinstance(document, dict) or set(document) - set(KEYS):
        raise InputError([Problem("$", "the erase input holds only 'skip_block_devices' "
                                       "(a list of root device hints), 'method' and "
                                       "'overwrite_passes'")])
    hints = document.get("skip_block_devices") or []
    if not isinstance(hints, list) or len(hints) > MAX_SKIP_HINTS or not all(
            isinstance(h, dict) and h for h in hints):
        raise InputError([Problem("$.skip_block_devices", f"must be a list of at most "
                                  f"{MAX_SKIP_HINTS} non-empty objects of root device hints")])
    return hints


def method(document):
    """(mode, overwrite passes): "metadata" (the default), "full" or "express"
    (run/secure_erase.py)."""
    from provision_agent.run import secure_erase
    document = document or {}
    mode = document.get("method", "metadata")
    passes = document.get("overwrite_passes", 1)
    problems = []
    if mode not in secure_erase.MODES:
        problems.append(Problem("$.method", f"one of {', '.join(secure_erase.MODES)}"))
    if not isinstance(passes, int) or isinstance(passes, bool) or \
            not 1 <= passes <= MAX_PASSES:
        problems.append(Problem("$.overwrite_passes", f"a whole number, 1 to {MAX_PASSES}"))
    if problems:
        raise InputError(problems)
    return mode, passes


def choose(disks, hints, runner, mounted, swaps):
    """(names to erase, [(name, why it is left alone)]). Reads only."""
    skipped = {}
    for i, hint in enumerate(hints):
        try:
            found = inventory.match(disks, hint)
        except ValueError as exc:
            raise InputError([Problem(f"$.skip_block_devices[{i}]", str(exc))]) from None
        for disk in found:
            skipped.setdefault(disk["name"], f"skip_block_devices[{i}] matches it")
    for disk in disks:
        name = disk["name"]
        if name in skipped:
            continue
        why = inventory.left_alone(disk)
        if why:
            skipped[name] = why
        else:
            reasons = preflight.in_use(runner, name, mounted, swaps)
            if reasons:
                skipped[name] = "in use: " + "; ".join(reasons)
    chosen = [d["name"] for d in disks if d["name"] not in skipped]
    return chosen, sorted(skipped.items())


def _activate_volume_groups(runner, chosen):
    """Activate the volume groups that stand on erased disks alone: a LUKS volume on one of
    their logical volumes shows (and so has its keyslots destroyed) only while it is active.
    Arrays need nothing: udev assembles them in the ramdisk as their members appear."""
    from provision_agent.drivers import blockinfo, lvm
    pvs = lvm.physical_volumes(runner)
    if not pvs:
        return
    erased = set(chosen)
    on = {}
    for pv in pvs:
        if pv.get("vg_name") and pv["pv_name"] != "[unknown]":
            on.setdefault(pv["vg_name"], set()).update(
                blockinfo.disks_under(runner, pv["pv_name"]) or ["?"])
    for vg, disks in sorted(on.items()):
        if disks <= erased:
            LOG.info("erase: activating volume group %s to reach what stands on it", vg)
            runner.run(["vgchange", "--activate", "y", vg], check=False)


def erase(document, runner, events, disks=None, mounted=None, swaps=None):
    """Erase; returns {"erased": [...], "skipped": [[name, why], ...]}. Raises CommandError
    (exit 4) when a disk cannot be cleared, after trying the others."""
    from provision_agent.drivers import blockinfo, udev, wipe
    hints = skip_hints(document)
    mode, passes = method(document)
    disks = machine_disks.discover(runner) if disks is None else disks
    mounted = blockinfo.mounted_sources() if mounted is None else mounted
    swaps = blockinfo.active_swaps() if swaps is None else swaps
    chosen, skipped = choose(disks, hints, runner, mounted, swaps)
    for name, why in skipped:
        LOG.info("erase: leaving %s alone: %s", name, why)
    _activate_volume_groups(runner, chosen)
    failed, methods = [], {}
    # a hardware plug-in's own erase of a whole disk (hardware.py), ranked as IPA's managers
    ranked = _hardware(disks) if mode != "metadata" else []
    for index, name in enumerate(chosen, 1):
        step = functools.partial(events.step, index, len(chosen))
        step("erase_metadata", "start", description=f"erase {name}")
        LOG.info("erase: clearing the metadata of %s", name)
        try:
            wipe.wipe(runner, name, cleared=chosen)
        except errors.CommandError as exc:
            step("erase_metadata", "failed", description=str(exc))
            failed.append(exc)
            continue
        step("erase_metadata", "done", description=f"erase {name}")
        if mode != "metadata":
            try:
                tick = functools.partial(events.progress, None, None, index, True)
                methods[name] = _erase_device(runner, step, name, mode, passes, tick, chosen,
                                              (ranked, events, disks))
            except errors.CommandError as exc:
                failed.append(exc)
    udev.settle(runner)
    if failed:
        raise failed[0]
    report = {"erased": chosen, "skipped": [list(s) for s in skipped]}
    if mode != "metadata":
        report["methods"] = methods
    return report


def _hardware(disks):
    from provision_agent.run import hardware
    return hardware.supported({"disks": disks})


def _erase_device(runner, step, name, mode, passes, tick=None, erasing=None, plugins=None):
    """The whole disk erased (mode "full" or "express"); the method that did it. erasing:
    every disk this erase clears, beyond which no method may reach (an NVMe format can).
    plugins: (ranked hardware plug-ins, events, the disks): the first whose erase_device
    erases it does, instead of provision."""
    from provision_agent.run import hardware, secure_erase
    step("erase_device", "start", description=f"erase {name} ({mode})")
    if plugins and plugins[0]:
        ranked, events, disks = plugins
        said = hardware.erase_device(ranked, name, mode, runner, events, {"disks": disks})
        if said:
            LOG.info("erase: %s: %s", name, said)
            step("erase_device", "done", description=f"erase {name}: {said}"[:1000])
            return said
    chosen, notes = secure_erase.erase_disk(runner, name, mode, passes, tick=tick,
                                            erasing=erasing)
    said = f"erase {name}: {chosen}" + (f" ({'; '.join(notes)})" if notes else "")
    if mode == "full" and chosen == "metadata":
        # even the overwrite failed: a full erase that did not happen is a failed cleaning
        step("erase_device", "failed", description=said[:1000])
        raise errors.CommandError(["erase", name], 1, reason=f"was not erased: {said}")
    LOG.info("erase: %s", said)
    step("erase_device", "done", description=said[:1000])
    return chosen
