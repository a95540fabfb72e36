"""The volumes of Fuel's disk spaces as partitions, filesystems and md arrays: partition,
raid and pv volumes, Ceph journals split as fuel-agent split them, and each volume's size
checked (docs/nailgun-mapping.md, "Disk spaces")."""

import logging
import re

from provision_agent.data_drivers import native
from provision_agent.data_drivers.nailgun.document import is_num as _is_num
from provision_agent.data_drivers.nailgun.document import shown as _shown
from provision_agent.data_drivers.nailgun.document import slug as _slug
from provision_agent.data_drivers.nailgun.volume_groups import (
    unknown_kept_array_type,
    unknown_kept_type,
)
from provision_agent.plan.model import FS_TYPES_NOT_CARRIED
from provision_agent.plan.units import MAX_BYTES, MiB

LOG = logging.getLogger(__name__)

# What Fuel's agent put first on every disk it partitioned: a bios_grub partition and an unformatted
# partition reserved for UEFI. Fuel's `boot` volume is the space it reserves for them.
BIOS_GRUB_MIB = 24
UEFI_MIB = 200
# fuel-agent: "No more than 10GB will be allocated to a single journal partition".
CEPH_JOURNAL_MAX_MIB = 10240
# The native format's filesystem types (less those it takes only to refuse them: the ramdisk
# carries no mkfs for them) and its bound on sizes, in MiB.
FS_TYPES = [t for t in native.schema()["$defs"]["filesystem"]["properties"]["type"]["enum"]
            if t not in FS_TYPES_NOT_CARRIED]
MAX_MIB = MAX_BYTES // MiB
GUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
DEFAULT_LVM_META_MIB = 64
MIN_LVM_META_MIB = 10
# fuel-agent's ks_spaces validator: "Root file system must be less than 16T".
MAX_ROOT_MIB = 16 * 1024 * 1024
# 1 MiB before the first partition (alignment) and the GPT backup at the end rounded to 1 MiB.
GPT_OVERHEAD_MIB = 2
# Fuel sized the volumes for the exact disk; the last one may give up this much to alignment.
SHRINK_LIMIT_MIB = 8


def _mounted(vol):
    return vol.get("mount") not in (None, "", "none")


def _md_name(mount, taken):
    """/dev/md/NAME after the mount: boot, root for /, else the path with / → - (var-lib-mysql);
    numbered when two mounts come out the same (/root beside /, or a cut at 32 characters)."""
    base = {"/boot": "boot", "/": "root"}.get(mount) or _slug(mount.strip("/").replace("/", "-"))
    name, k = base[:32], 2
    while name in taken:
        name, k = f"{base[:32 - len(str(k)) - 1]}-{k}", k + 1
    taken.add(name)
    return name



class DiskVolumes:
    """The volume half of the translation (driver.py's _Translation): uses its problem(),
    refuse(), warn() and the state it keeps."""

    def check_sizes(self, where, volumes):
        """The indexes of the volumes whose size is refused (each reported here)."""
        refused = set()
        for j, vol in enumerate(volumes):
            if not isinstance(vol, dict) or not _is_num(vol.get("size")):
                continue
            if self.fractional(f"{where} volumes[{j}]", vol["size"]):
                self.refused_mounts.add(vol.get("mount"))
                refused.add(j)
                continue
            if vol["size"] > MAX_MIB:
                # The native format's bound too; said here, before the sums that would echo it.
                self.refuse(f"{where} volumes[{j}]", "size larger than any disk (8 EiB)", vol)
                refused.add(j)
                continue
            if vol["size"] < 0:
                # Nailgun writes these when its allocation did not fit; fuel-agent skipped them.
                self.warn(f"{where} volumes[{j}]", f"negative size {vol['size']} MiB (Nailgun "
                          "could not fit this volume): not created")
            if vol.get("mount") == "/" and vol["size"] > MAX_ROOT_MIB:
                self.problem(f"{where} volumes[{j}]", f"root filesystem of {vol['size']} MiB: "
                             "must be less than 16 TiB (as fuel-agent required)")
        return refused

    def fractional(self, where, size):
        if size == int(size):
            return False
        self.problem(where, f"size {size} MiB is not a whole number of MiB (fuel-agent's schema "
                            "required integers)")
        return True

    def volume(self, n, where, j, vol):
        vwhere = f"{where} volumes[{j}]"
        kind = vol.get("type")
        pid = f"d{n}-v{j}"
        part = {"id": pid, "size": int(vol["size"]), "origin": vwhere}
        if kind == "partition":
            fs_type = vol.get("file_system") or "xfs"
            guid = vol.get("partition_guid")
            if self.bad_guid(vwhere, guid):
                self.refused_mounts.add(vol.get("mount"))
                return None
            if guid:
                part.update(type="custom", type_guid=guid)
            else:
                part["type"] = "swap" if fs_type == "swap" else "linux"
            # fuel-agent's rule: a file system when either is given ('none' is not), xfs by
            # default, unmounted without a mount (Nailgun's swift-storage: xfs, mount none).
            fs_given = vol.get("file_system") not in (None, "none")
            mount = vol.get("mount") if vol.get("mount") not in (None, "none") else None
            if self.is_kept(vol):
                if mount == "/" and not fs_given:
                    self.refuse(vwhere, unknown_kept_type(mount), vol)
                    return None
                part["keep"] = True
            if fs_type == "swap":
                self.add_fs(pid, "swap", None, vol, vwhere)
            elif fs_given or mount:
                self.add_fs(pid, fs_type if fs_given else "xfs", mount, vol, vwhere)
        elif kind == "raid" and not _mounted(vol):
            # Without a mount nothing names an array: fuel-agent made a plain partition.
            part["type"] = "linux"
            if self.is_kept(vol):
                part["keep"] = True
        elif kind == "raid":
            part["type"] = "raid"
            if self.is_kept(vol):
                # a member of a kept array (build_raids): its place and contents stay
                part["keep"] = True
            self.raid_members.setdefault(vol["mount"], []).append((pid, vol, vwhere))
        elif kind == "pv":
            part["type"] = "lvm"
            vg = vol.get("vg")
            meta = vol.get("lvm_meta_size", DEFAULT_LVM_META_MIB)
            if not vg:
                self.problem(vwhere, "a pv volume needs vg: the volume group it belongs to")
                return None
            if not _is_num(meta) or meta < MIN_LVM_META_MIB:
                self.problem(vwhere, f"lvm_meta_size {meta!r} is too small (at least "
                                     f"{MIN_LVM_META_MIB} MiB)")
                meta = DEFAULT_LVM_META_MIB
            if self.is_kept(vol):
                part["keep"] = True
            self.pvs.setdefault(vg, []).append([pid, part, meta])
        else:
            self.refuse(vwhere, f"unknown volume type {_shown(kind)} (partition, raid, pv, boot, "
                                "lvm_meta_pool)", vol)
            return None
        return part

    def ceph_journal(self, n, where, j, vol):
        """fuel-agent's split: one journal partition per Ceph OSD, the OSDs spread evenly over
        the journal volumes, each partition the volume's size / ceil(OSDs / journals), at most
        10240 MiB, with the volume's partition_guid."""
        vwhere = f"{where} volumes[{j}]"
        guid = vol.get("partition_guid")
        if self.bad_guid(vwhere, guid):
            return []
        if not self.ceph_osds:
            self.warn(vwhere, "a Ceph journal volume but no Ceph OSD volume anywhere: no "
                              "journal partition made (fuel-agent failed on this)")
            return []
        ratio = -(-self.ceph_osds // self.ceph_journals)
        size = min(int(vol["size"]) // ratio, CEPH_JOURNAL_MAX_MIB)
        count = min(ratio, self.journals_left)
        self.journals_left -= count
        kind = {"type": "custom", "type_guid": guid} if guid else {"type": "linux"}
        if self.is_kept(vol):
            # Found again by position: the split above is fuel-agent's, so are the offsets.
            kind["keep"] = True
        return [{"id": f"d{n}-v{j}-j{k}", "size": size, **kind,
                 "origin": f"{vwhere} (Ceph journal {k + 1} of {count})"}
                for k in range(count)]

    def bad_guid(self, where, guid):
        if guid and not (isinstance(guid, str) and GUID.fullmatch(guid)):
            self.problem(where, "partition_guid must be a GPT type GUID "
                                "(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)")
            return True
        return False

    def fit_last(self, where, disk_mib, parts):
        """Fuel's volumes add up to the disk; alignment and the GPT backup need a little of it."""
        usable = disk_mib - GPT_OVERHEAD_MIB
        total = sum(p["size"] for p in parts)
        excess = total - usable
        if excess <= 0:
            return
        # The configdrive partition is Fuel's fixed 20 MiB: the last volume before it gives way.
        last = [p for p in parts if p["id"] != "configdrive"][-1]
        if excess > SHRINK_LIMIT_MIB or last["size"] - excess < 1 or last.get("keep"):
            # fuel-agent never compared the volumes with Fuel's size: the real disk decides
            # (resolution refuses, exit 3, when they do not fit on it).
            self.warn(where, f"the partitions need {total} MiB (with {BIOS_GRUB_MIB} MiB "
                             f"bios_grub, {UEFI_MIB} MiB UEFI and {GPT_OVERHEAD_MIB} MiB GPT "
                             f"overhead), more than Fuel's size of the disk ({disk_mib} MiB); "
                             "the real disk's size decides")
            return
        LOG.info("%s: last volume shrinks by %d MiB to fit alignment and the GPT backup",
                 last["origin"], excess)
        last["size"] -= excess

    def add_fs(self, device, fs_type, mount, vol, where):
        if fs_type not in FS_TYPES:
            self.refuse(where, f"file_system {_shown(fs_type)} is not one provision makes "
                               f"({', '.join(FS_TYPES)})", vol)
            return
        fs = {"device": device, "type": fs_type, "origin": where}
        if mount:
            fs["mount"] = mount
        if vol.get("disk_label"):
            fs["label"] = vol["disk_label"]
        self.filesystems.append(fs)

    def build_raids(self):
        """Every raid volume with the same mount, across disks, is one RAID1 (Fuel's md)."""
        names = set()
        for mount, members in self.raid_members.items():
            pid, vol, where = members[0]
            fs_type = vol.get("file_system") or ("ext2" if mount == "/boot" else "xfs")
            if self.kept_raid_refused(mount, members, fs_type):
                continue
            if len(members) == 1:
                LOG.info("%s: only one raid volume for %s, using the partition directly",
                         where, mount)
                self._fs_or_swap(pid, fs_type, mount, vol, where)
                continue
            name = _md_name(mount, names)
            rid = f"md-{name}"
            raid = {"id": rid, "name": name, "level": 1, "members": [m[0] for m in members],
                    "origin": ", ".join(m[2] for m in members)}
            if mount == "/boot":
                # Superblock at the end: the bootloader reads each member as a plain filesystem.
                raid["metadata"] = "1.0"
            if mount in self.kept_raids:
                # assembled from its kept members, its filesystem used as it is
                raid["keep"] = True
            self.raids.append(raid)
            self._fs_or_swap(rid, fs_type, mount, vol, where)

    def kept_raid_refused(self, mount, members, fs_type):
        """A kept array's (or, with one member, a kept partition's) filesystem is used as it
        is: its type is not guessed (refused, naming the first member, when none gives it)."""
        if mount not in self.kept_raids or fs_type == "swap" or any(
                m[1].get("file_system") not in (None, "none") for m in members):
            return False
        pid, vol, where = members[0]
        if len(members) > 1:
            self.refuse(where, unknown_kept_array_type(mount, fs_type), vol)
        elif mount == "/":          # one member: a kept partition, under the partitions' rule
            self.refuse(where, unknown_kept_type(mount), vol)
        else:
            return False
        return True

    def _fs_or_swap(self, device, fs_type, mount, vol, where):
        self.add_fs(device, fs_type, None if fs_type == "swap" else mount, vol, where)
