"""Where fuel-agent put /boot, and the /boot it refused (docs/nailgun-mapping.md, "/boot")."""

from provision_agent.data_drivers.nailgun.document import is_num, space_where, used


def is_nvme(space):
    # fuel-agent's test: BIOS firmware rarely boots from NVMe, and it installed BIOS grub only.
    return "nvme" in str(space.get("name"))


def is_fake_raid_os_disk(space):
    """A firmware ("fake") RAID array Nailgun listed as a disk (md123), holding VG os:
    fuel-agent's md_os_disks, where /boot had to be for grub-install to work."""
    return str(space.get("name")).startswith("md") and any(
        v.get("type") == "pv" and v.get("vg") == "os" for _, v in used(space["volumes"]))


def boot_volumes(spaces):
    """[(space index, space, /boot volume index)] of the disks that are used (not only
    Nailgun's /boot leftover) and hold a /boot raid or partition volume."""
    found = []
    for i, s in enumerate(spaces):
        if not isinstance(s, dict) or s.get("type") != "disk" or not is_num(s.get("size")) \
                or s["size"] <= 0 or not isinstance(s.get("volumes"), list):
            continue
        vols = used(s["volumes"])
        if not any(v.get("mount") != "/boot" for _, v in vols):
            continue
        for j, v in vols:
            if v.get("mount") == "/boot" and v.get("type") in ("raid", "partition"):
                found.append((i, s, j))
                break
    return found


def fuel_boot_disk(spaces):
    """(index of the space where fuel-agent put /boot, or None; whether that disk is a
    fake-RAID OS disk). fuel-agent's pick: the first used non-NVMe disk with a /boot volume,
    a fake-RAID OS disk among them first, then a `bootable` one."""
    found = [(not is_fake_raid_os_disk(s), not s.get("bootable"), i)
             for i, s, _ in boot_volumes(spaces) if not is_nvme(s)]
    if not found:
        return None, False
    best = min(found)
    return best[2], not best[0]


def nvme_boot_problem(spaces):
    """(where, why) when every /boot volume is on an NVMe disk: fuel-agent never put /boot on
    NVMe and refused such a document ("/boot partition has not been created")."""
    volumes = boot_volumes(spaces)
    if not volumes or any(not is_nvme(s) for _, s, _ in volumes):
        return None
    i, s, j = volumes[0]
    return (f"{space_where(i, s)} volumes[{j}]",
            "/boot is on NVMe disks only: BIOS firmware rarely boots from NVMe, and Fuel "
            "documents get BIOS grub, as fuel-agent installed; fuel-agent refused this document "
            "too. Put /boot (and so grub) on a SATA or SAS disk as well")
