"""Fuel's provision.json (Nailgun's provisioning serialiser output) → the native format.

The document is translated into a native document and built by the native driver, so Fuel input
gets the same schema and semantic checks as native input. Problems in the Fuel document are
reported in Fuel's terms (`ks_spaces[2] (sdc) volumes[3]`), and every native object carries that
location as its `origin`, so later errors (no disk matches, too small) name the space too.
The rules, field by field, are in docs/nailgun-mapping.md.
"""

import logging

from provision_agent.data_drivers import native
from provision_agent.data_drivers.base import DataDriver
from provision_agent.data_drivers.nailgun import document as nailgun_shape
from provision_agent.data_drivers.nailgun.boot import fuel_boot_disk, nvme_boot_problem
from provision_agent.data_drivers.nailgun.disks import disk_hints
from provision_agent.data_drivers.nailgun.document import is_num as _is_num
from provision_agent.data_drivers.nailgun.document import slug as _slug
from provision_agent.data_drivers.nailgun.document import space_where
from provision_agent.data_drivers.nailgun.document import used as _used
from provision_agent.data_drivers.nailgun.install import (
    bootloader,
    configdrive,
    images,
    wants_configdrive,
)
from provision_agent.data_drivers.nailgun.places import fuel_problem
from provision_agent.data_drivers.nailgun.volume_groups import (
    VgSpaces,
    kept_raid_mounts,
    kept_volume_groups,
)
from provision_agent.data_drivers.nailgun.volumes import (
    BIOS_GRUB_MIB,
    UEFI_MIB,
    DiskVolumes,
    _mounted,
)
from provision_agent.errors import InputError, Problem

LOG = logging.getLogger(__name__)

CONFIGDRIVE_MIB = 20


def _named(spaces, name):
    """The used volumes of that name the disk spaces hold (fuel-agent counted them)."""
    return [v for s in spaces if isinstance(s, dict) and s.get("type") == "disk"
            and isinstance(s.get("volumes"), list)
            for _, v in _used(s["volumes"]) if v.get("name") == name]


def _disk_id(n, space):
    # ':' because no partition id has one (d0-uefi, d0-v2): a disk Fuel named uefi or v2
    # would otherwise get the id of one of its own partitions.
    return f"d{n}:{_slug(space.get('name') or space.get('id'))}"[:63]


class NailgunDriver(DataDriver):
    def layout(self):
        self.warnings = []
        doc = self.native_document()
        try:
            layout = native.NativeDriver(doc).layout()
        except InputError as exc:
            raise InputError([fuel_problem(doc, p) for p in exc.problems]) from None
        layout.warnings += self.warnings
        return layout

    def native_document(self):
        shape, data = nailgun_shape.check(self.data)
        if data is None:
            raise InputError(shape)
        t = _Translation(data)
        doc = t.run()
        if shape or t.problems:
            raise InputError(shape + t.problems)
        self.warnings = t.warnings
        return doc


class _Translation(VgSpaces, DiskVolumes):
    def __init__(self, data):
        self.data = data
        self.problems = []
        self.warnings = []
        self.disks, self.raids, self.vgs, self.filesystems = [], [], [], []
        self.raid_members = {}       # mount → [(partition id, volume, where)]
        self.pvs = {}                # vg name → [(partition id, usable MiB)]
        self.configdrive_placed = False
        self.refused_mounts = set()
        self.vg_where = {}           # VG name → the space that describes it

    def problem(self, where, msg):
        self.problems.append(Problem(where, msg))

    def refuse(self, where, msg, vol):
        """A volume refused: its mount has no device now, and that is not a problem of its own
        (image_data would otherwise say no volume mounts it)."""
        self.problem(where, msg)
        self.refused_mounts.add(vol.get("mount"))

    def warn(self, where, msg):
        LOG.warning("%s: %s", where, msg)
        self.warnings.append(f"{where}: {msg}")

    def run(self):
        ks_meta = self.data.get("ks_meta") if isinstance(self.data, dict) else None
        pm_data = ks_meta.get("pm_data") if isinstance(ks_meta, dict) else None
        spaces = pm_data.get("ks_spaces") if isinstance(pm_data, dict) else None
        if not isinstance(spaces, list):
            self.problem("ks_meta.pm_data.ks_spaces", "missing: Fuel's partitioning data is a "
                                                      "list of disk and vg spaces here")
            return {}
        self.want_configdrive = wants_configdrive(self.data)
        self.boot_disk, self.boot_on_fake_raid = fuel_boot_disk(spaces)
        nvme = nvme_boot_problem(spaces)
        if nvme:
            self.problem(*nvme)
        self.check_profile()
        self.ceph_osds = len(_named(spaces, "ceph"))
        self.ceph_journals = len(_named(spaces, "cephjournal"))
        # Which journal is an OSD's is written inside the OSD, not in the document: a kept OSD
        # keeps every journal, as fuel-agent's skipped partitioning did.
        self.osd_kept = any(v.get("keep_data") for v in _named(spaces, "ceph"))
        self.journals_left = self.ceph_osds
        self.kept_vgs = kept_volume_groups(spaces)
        self.kept_raids = kept_raid_mounts(spaces)
        for i, space in enumerate(spaces):
            if not isinstance(space, dict) or space.get("type") not in ("disk", "vg"):
                self.problem(f"ks_spaces[{i}]", "needs type \"disk\" or \"vg\"")
            elif space["type"] == "disk":
                self.disk_space(i, space)
        self.build_raids()
        self.vg_spaces(spaces)
        if not self.disks:
            if not self.problems:      # otherwise the spaces' own problems say why
                self.problem("ks_meta.pm_data.ks_spaces", "no disk space has a volume to create")
            return {}
        doc = {"version": 1, "disks": self.disks, "raids": self.raids,
               "volume_groups": self.vgs, "filesystems": self.filesystems}
        doc["images"] = images(ks_meta, self.filesystems, self.problem, self.refused_mounts,
                               self.kept_devices())
        doc["bootloader"] = bootloader(pm_data)
        if self.want_configdrive:
            doc["configdrive"] = configdrive(self.data, "configdrive" if self.configdrive_placed
                                             else None, self.problem)
        return doc

    def kept_devices(self):
        """Device id → why its data is kept, for image_data to name in Fuel's terms."""
        kept = {p["id"]: "keeps its data (keep_data)" for d in self.disks
                for p in d["partitions"] if p.get("keep")}
        kept.update({lv["id"]: "is in a volume group kept with keep_data" for vg in self.vgs
                     if vg.get("keep") for lv in vg.get("logical_volumes", [])})
        kept.update({md["id"]: "is an md array kept with keep_data" for md in self.raids
                     if md.get("keep")})
        return kept

    # --- disk spaces -------------------------------------------------------------------------

    def used_volumes(self, where, space):
        """The (index, volume) pairs of a disk space that make partitions, or None when the
        disk is not used: the space refused (each problem reported), empty, or holding only
        Nailgun's /boot leftover."""
        size = space.get("size")
        # fuel-agent's schema required the list on every disk; Nailgun always writes one.
        volumes = space.get("volumes")
        if not _is_num(size) or not isinstance(volumes, list):
            self.problem(where, "a disk space needs a numeric size (MiB) and a volumes list")
            return None
        if "id" in space and not isinstance(space["id"], str):
            self.problem(where, "id must be a string (a kernel name or a disk/by-path, "
                                "disk/by-id link)")
            return None
        if self.fractional(where, size):
            return None
        if size <= 0:
            LOG.info("%s: size %s MiB, disk not used", where, size)
            return None
        refused = self.check_sizes(where, volumes)
        used = [(j, v) for j, v in _used(volumes) if j not in refused]
        bad = [j for j, v in enumerate(volumes) if not isinstance(v, dict)
               or not _is_num(v.get("size"))]
        for j in bad:
            self.problem(f"{where} volumes[{j}]", "a volume needs a type and a numeric size (MiB)")
        if not used:
            LOG.info("%s: no volume to create, disk not used", where)
            return None
        if all(v.get("mount") == "/boot" for _, v in used):
            # fuel-agent's rule: Nailgun puts a /boot volume on every disk; a disk with nothing
            # else is left as it is (not wiped, not added to the /boot array).
            LOG.info("%s: only Nailgun's /boot leftover, disk not used (as fuel-agent)", where)
            return None
        return used

    def disk_space(self, i, space):
        """The disk a used disk space becomes: Fuel's reserved partitions, one per volume,
        the configdrive on the OS disk, the last partition fitted to the space's size."""
        where = space_where(i, space)
        used = self.used_volumes(where, space)
        if used is None:
            return
        size, volumes = space["size"], space["volumes"]
        n = len(self.disks)
        disk_id = _disk_id(n, space)
        parts = [
            {"id": f"d{n}-bios_grub", "size": BIOS_GRUB_MIB, "type": "bios_grub",
             "origin": f"{where} (bios_grub partition Fuel puts on every disk)"},
            {"id": f"d{n}-uefi", "size": UEFI_MIB, "type": "linux", "name": "UEFI",
             "origin": f"{where} (UEFI partition Fuel reserves on every disk)"}]
        if self.boot_on_fake_raid and i != self.boot_disk:
            # fuel-agent put /boot on the fake-RAID disk only, where grub-install needs it; the
            # other disks' /boot volumes made nothing, so what follows them lines up too.
            used = [(j, v) for j, v in used if v.get("mount") != "/boot"]
        for j, vol in used:
            if vol.get("name") == "cephjournal" and vol.get("type") == "partition":
                parts += self.ceph_journal(n, where, j, vol)
                continue
            part = self.volume(n, where, j, vol)
            if part:
                parts.append(part)
        self.check_kept_position(i, where, used)
        if self.want_configdrive and not self.configdrive_placed and self._is_os_disk(volumes):
            # Last on the disk, where fuel-agent put it: kept partitions before it line up.
            parts.append({"id": "configdrive", "size": CONFIGDRIVE_MIB, "type": "linux",
                          "name": "config-2", "origin": f"{where} (configdrive partition)"})
            self.configdrive_placed = True
        self.fit_last(where, size, parts)
        match, fallback = disk_hints(space)
        if not match:
            self.problem(where, "a disk space needs an id, a name or extra links to find the disk")
            return
        entry = {"id": disk_id, "match": match, "partitions": parts, "origin": where}
        if fallback:
            entry["fallback_match"] = fallback
        self.disks.append(entry)

    @staticmethod
    def _is_os_disk(volumes):
        return any(isinstance(v, dict) and _is_num(v.get("size")) and v["size"] > 0 and (
            v.get("mount") == "/" or (v.get("type") == "pv" and v.get("vg") == "os"))
            for v in volumes)

    def check_kept_position(self, i, where, used):
        """A kept partition is found again by position. This driver mirrors /boot on every disk
        with a /boot volume, where fuel-agent made it on one disk only: behind such a member a
        kept partition lines up with a disk this driver provisioned, not with one fuel-agent
        did. Said in the plan; the preflight checks the position before anything is written."""
        before = []
        for j, vol in used:
            if self.is_kept(vol):
                moved = [b for b in before if b[1] == "/boot" and i != self.boot_disk]
                if moved:
                    self.warn(f"{where} volumes[{j}]",
                              f"keep_data: volumes[{moved[0][0]}] (a /boot member) comes "
                              "before this partition, and fuel-agent put /boot on one disk "
                              "only, not on this one: the kept partition lines up with a disk "
                              "provision-agent made, not with one fuel-agent made (the preflight "
                              "refuses a partition that is not where the plan puts it)")
            before.append((j, vol.get("mount"), vol.get("name")))

    def is_kept(self, vol):
        """A partition volume with keep_data, a Ceph journal beside a kept OSD, a raid volume
        of a kept array, or a pv volume of a kept VG."""
        if vol.get("type") == "partition" or (vol.get("type") == "raid" and not _mounted(vol)):
            return bool(vol.get("keep_data")) or (vol.get("name") == "cephjournal"
                                                  and self.osd_kept)
        if vol.get("type") == "raid":
            return vol.get("mount") in self.kept_raids
        return vol.get("type") == "pv" and vol.get("vg") in self.kept_vgs

    def check_profile(self):
        profile = self.data.get("profile")
        if isinstance(profile, str) and "centos" in profile and "7" not in profile:
            # fuel-agent's guess for such a profile: CentOS 6.5, grub1, md metadata 0.90.
            self.problem("profile", f"{profile!r} is CentOS 6, which fuel-agent installed with "
                                    "grub1 and md metadata 0.90; provision installs grub2 "
                                    "only: not supported")
