"""Fuel's vg spaces and the volume groups their pv volumes make (docs/nailgun-mapping.md,
"VG spaces" and "Keeping data")."""

from provision_agent.data_drivers.nailgun.document import is_num as _is_num
from provision_agent.data_drivers.nailgun.document import shown as _shown
from provision_agent.data_drivers.nailgun.document import slug as _slug
from provision_agent.data_drivers.nailgun.document import space_where


def unknown_kept_type(mount):
    """A kept / is mounted to receive the image: with fuel-agent's default xfs guessed for a
    filesystem this run does not make, the run would stop at that mount, tables edited."""
    return (f"keep_data keeps the filesystem mounted at {mount}, which is used as it is "
            f"(mounted there for the image), but the volume gives no file_system: "
            f"fuel-agent's default xfs would be a guess about data it did not make. Give its "
            f"file_system")


def keep_refused():
    """keep_data on a logical volume alone."""
    return ("keep_data on a logical volume whose volume group is not kept: put keep_data "
            "on the group's pv volumes to keep the group with all its logical volumes, as "
            "fuel-agent did; alone it is refused, because the plan would re-create the "
            "group and format this volume")


def unknown_kept_array_type(mount, default):
    """A kept array's filesystem is mounted as it is, and (unlike a kept partition's) its type
    cannot be read before the first write: the array is assembled during the run."""
    return (f"keep_data keeps the md array mounted at {mount}, whose filesystem is used as "
            f"it is, but the volume gives no file_system: the default {default} would be a "
            f"guess about data this run does not make, and a wrong one would stop the run at "
            f"that mount with the tables already edited. Give its file_system")


def kept_raid_mounts(spaces):
    """The mounts whose md array a raid volume with keep_data keeps: the whole array, with
    every member (each disk's raid volume of that mount), as a kept pv keeps its group."""
    return {vol.get("mount") for vol in _volumes(spaces) if vol.get("type") == "raid"
            and vol.get("mount") not in (None, "", "none") and vol.get("keep_data")}


def _volumes(spaces):
    """The used volumes of the disk spaces."""
    return [vol for space in spaces if isinstance(space, dict) and space.get("type") == "disk"
            and isinstance(space.get("volumes"), list) for vol in space["volumes"]
            if isinstance(vol, dict) and _is_num(vol.get("size")) and vol["size"] > 0]


def kept_volume_groups(spaces):
    """Names of the VGs a pv volume with keep_data keeps: fuel-agent kept the whole group,
    with every one of its physical volumes and logical volumes."""
    return {vol.get("vg") for vol in _volumes(spaces) if vol.get("type") == "pv"
            and vol.get("keep_data")}


class VgSpaces:
    """The vg-space part of the translation (nailgun._Translation): its pv volumes were
    collected in self.pvs while the disk spaces were read."""

    def vg_spaces(self, spaces):
        for i, space in enumerate(spaces):
            if isinstance(space, dict) and space.get("type") == "vg":
                self.vg_space(i, space)
        named = {vg["name"] for vg in self.vgs}
        for name, pvs in self.pvs.items():
            if name not in named:
                # Fuel creates the VG even when no vg space lists volumes for it.
                vg = {"id": self.vg_id(name), "name": name, "pvs": [pid for pid, _, _ in pvs],
                      "origin": pvs[0][1]["origin"]}
                if name in self.kept_vgs:
                    # Kept as fuel-agent kept it, with or without a vg space: its pv
                    # partitions are kept, and a group made anew would overwrite them.
                    vg["keep"] = True
                self.vgs.append(vg)

    def vg_id(self, name):
        # Numbered: names that differ may have the same slug ("a." and "a").
        return f"vg{len(self.vgs)}-{_slug(name)}"[:63]

    def vg_space(self, i, space):
        where = space_where(i, space)
        name = space.get("id")
        volumes = space.get("volumes")
        if not name or not isinstance(volumes, list):
            self.problem(where, "a vg space needs an id (the VG name) and a volumes list")
            return
        if name in self.vg_where:
            self.problem(where, f"a second vg space for volume group {_shown(name)} (the first "
                                f"is {self.vg_where[name]})")
            return
        self.vg_where[name] = where
        lvs = []
        refused = self.check_sizes(where, volumes)
        for j, vol in enumerate(volumes):
            vwhere = f"{where} volumes[{j}]"
            if not isinstance(vol, dict) or not _is_num(vol.get("size")):
                self.problem(vwhere, "a volume needs a type and a numeric size (MiB)")
                continue
            if vol["size"] <= 0 or j in refused:
                continue
            if vol.get("type") != "lv":
                self.refuse(vwhere, f"volume type {_shown(vol.get('type'))} in a vg space; "
                                    "only lv", vol)
                continue
            if not vol.get("name"):
                self.refuse(vwhere, "an lv needs a name", vol)
                continue
            if vol.get("keep_data") and name not in self.kept_vgs:
                self.refuse(vwhere, keep_refused(), vol)
                continue
            lid = f"lv{i}-{j}-{_slug(vol['name'])}"[:63]
            lvs.append({"id": lid, "name": vol["name"], "size": int(vol["size"]),
                        "origin": vwhere})
            fs_type = vol.get("file_system") or "xfs"
            mount = vol.get("mount")
            if name in self.kept_vgs and mount == "/" and not vol.get("file_system"):
                self.refuse(vwhere, unknown_kept_type(mount), vol)
                continue
            if fs_type == "swap":
                self.add_fs(lid, "swap", None, vol, vwhere)
            elif mount and mount != "none":
                self.add_fs(lid, fs_type, mount, vol, vwhere)
        pvs = self.pvs.get(name, [])
        if not pvs and not lvs:
            return
        if not pvs:
            if lvs:
                self.problem(where, f"volume group {_shown(name)} has logical volumes but no disk "
                                    "space has a non-empty pv volume for it")
            return
        capacity = sum(part["size"] - meta for _, part, meta in pvs)
        need = sum(lv["size"] for lv in lvs)
        if need > capacity:
            self.problem(where, f"logical volumes need {need} MiB but the pv volumes give "
                                f"{capacity} MiB after LVM metadata")
        vg = {"id": self.vg_id(name), "name": name, "pvs": [pid for pid, _, _ in pvs],
              "logical_volumes": lvs, "origin": where}
        if name in self.kept_vgs:
            vg["keep"] = True
        self.vgs.append(vg)
