"""input → data driver → layout → validation → resolution → plan, with nothing written.

Everything that can be wrong with the input or the machine is found here, before the executor
touches a disk.
"""

import importlib
import importlib.metadata
import logging
from dataclasses import dataclass

from provision_agent.errors import InputError, MachineMismatch, Problem
from provision_agent.plan import detect, existing, model, planner, resolve, signing, validate
from provision_agent.plan.units import parse_size

LOG = logging.getLogger(__name__)

DATA_DRIVER_NAMESPACE = "provision_agent.data_drivers"
# Ours, as setup.cfg registers them (a unit test keeps the two equal), loaded without
# stevedore: its lookup scans and hashes every installed package's entry points and, in a
# freshly booted ramdisk with no cache yet, builds its cache first; seconds under emulation
# on every deploy. A site's own drivers still come through stevedore.
BUILTIN_DATA_DRIVERS = {
    "native": "provision_agent.data_drivers.native:NativeDriver",
    "nailgun": "provision_agent.data_drivers.nailgun.driver:NailgunDriver",
    "ironic": "provision_agent.data_drivers.ironic:IronicDriver",
}


@dataclass
class Planned:
    resolved: resolve.Resolved
    steps: list

    @property
    def disk_names(self):
        """The machine's names of the disks this plan provisions."""
        return [want["name"] for want in self.resolved.disks.values()]


def data_driver_names():
    # Names from the entry points: stevedore would import every driver to list them.
    return sorted({ep.name for ep in importlib.metadata.entry_points(group=DATA_DRIVER_NAMESPACE)})


def data_driver_class(name):
    if name in BUILTIN_DATA_DRIVERS:
        module, _, attr = BUILTIN_DATA_DRIVERS[name].partition(":")
        return getattr(importlib.import_module(module), attr)
    # Checked first: stevedore logs a WARNING of its own for a name it cannot load.
    if name not in data_driver_names():
        raise InputError([Problem("--data_driver", f"unknown data driver {name!r}; "
                                                   f"known: {', '.join(data_driver_names())}")])
    from stevedore import driver as sd_driver
    return sd_driver.DriverManager(DATA_DRIVER_NAMESPACE, name).driver


def input_format(name):
    """"json" or "yaml": the text a data driver's input is (its class's input_format)."""
    return getattr(data_driver_class(name), "input_format", "json")


def load_layout(document, driver_name="native"):
    driver = data_driver_class(driver_name)(document)
    try:
        return driver.layout()
    except InputError:
        other = detect.guess_driver(document)
        if other and other != driver_name:
            # The schema errors of the wrong format are noise; the format is the problem.
            raise InputError([Problem("$", f"this looks like {detect.describe(other)}, not "
                                           f"input for the {driver_name!r} data driver: run "
                                           f"with --data_driver {other}")]) from None
        raise


def complete(layout):
    """Add what the input implies but does not spell out."""
    cd = layout.configdrive
    if cd and not cd.partition and layout.disks:
        disk = next((d for d in layout.disks if d.id == cd.disk), layout.disks[0])
        if disk.partitions:
            disk.partitions.append(model.Partition(
                id=planner.CONFIGDRIVE_ID, size=parse_size(planner.CONFIGDRIVE_BYTES, "B"),
                type="linux", name="config-2" if disk.table == "gpt" else None,
                origin=f"{cd.origin} (implied partition)"))
            _pad_mirror_peers(layout, disk, f"{cd.origin} (implied partition)")
    return layout


def _pad_mirror_peers(layout, disk, origin):
    """The configdrive partition at the end of one disk shrinks that disk's partitions sized by
    what remains (or by a share): an array with such a member there would get members of
    different sizes, and the array only uses the smallest. An unused partition of the same
    size at the end of every other disk holding a member keeps them equal."""
    on_disk = {p.id: p for p in disk.partitions}
    peers = []
    for raid in layout.raids:
        here = [on_disk[m] for m in raid.members + raid.spares if m in on_disk]
        if not any(p.size.remaining or p.size.percent for p in here):
            continue
        for other in layout.disks:
            if other is not disk and other not in peers and any(
                    p.id in raid.members + raid.spares for p in other.partitions):
                peers.append(other)
    for n, other in enumerate(peers, 1):
        other.partitions.append(model.Partition(
            id=f"{planner.CONFIGDRIVE_ID}-pad-{n}",
            size=parse_size(planner.CONFIGDRIVE_BYTES, "B"), type="linux",
            origin=f"{origin}: the same space kept free on {other.id}, so that the mirror "
                   f"members stay equal"))


def check_layout(layout, keyring=False):
    """The checks that need no machine (a layout that cannot boot, ids that do not exist...);
    raises InputError (2) listing every problem. keyring: whether image signatures can be
    verified (a keyring is configured): it decides which images the signature policy
    refuses."""
    problems = validate.check(complete(layout)) + signing.problems(layout, keyring)
    if problems:
        raise InputError(problems)
    if layout.extensions:
        _plugins_plan(layout)


class _Placeholders(dict):
    """Device paths without a machine: `<ID>` for any block id of the layout."""

    def __missing__(self, key):
        return f"<{key}>"


def _plugins_plan(layout):
    """The plug-ins' plan() run without a machine (a conductor with no recorded inventory):
    each gets the layout and a placeholder device path for every id, so that a plan() that
    raises, or returns what is not its step, is refused here (exit 2, naming the plug-in)
    instead of in the ramdisk."""
    from provision_agent.plan import extensions
    stand_in = resolve.Resolved(layout=layout, devices=_Placeholders())
    for phase in extensions.PHASES:
        extensions.planned(stand_in, phase)


def build_plan(layout, disks, keyring=False):
    """Validate and plan; raise InputError (2) or MachineMismatch (3) listing every problem.
    keyring: as for check_layout."""
    complete(layout)
    problems = validate.check(layout) + signing.problems(layout, keyring)
    res, mismatch = resolve.resolve(layout, disks)
    mismatch += existing.decide(res)     # what is kept if present: from the disks' tables
    if problems:
        raise InputError(problems + mismatch)
    if mismatch:
        raise MachineMismatch(mismatch)
    return Planned(res, planner.plan(res))
