"""Property: whatever volumes Fuel sized to fill a disk exactly, the translation fits that disk,
giving up at most a few MiB of the last volume."""

from hypothesis import given, settings
from hypothesis import strategies as st

from provision_agent.data_drivers.nailgun.driver import NailgunDriver
from provision_agent.data_drivers.nailgun.volumes import SHRINK_LIMIT_MIB
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline

MiB = 1 << 20


@st.composite
def fuel_disks(draw):
    disks = []
    for n in range(draw(st.integers(1, 3))):
        size = draw(st.integers(1024, 16384))
        boot = draw(st.integers(224, 300))
        cuts = sorted(draw(st.lists(st.integers(1, size - boot - 1), max_size=4, unique=True)))
        bounds = [0] + cuts + [size - boot]
        sizes = [b - a for a, b in zip(bounds, bounds[1:])]
        if any(s < SHRINK_LIMIT_MIB + 1 for s in sizes):
            sizes = [size - boot]
        vols = [{"type": "boot", "size": boot}]
        for j, s in enumerate(sizes):
            mount = "/" if n == 0 and j == 0 else f"/srv/d{n}v{j}"
            vols.append({"type": "partition", "mount": mount, "file_system": "ext4", "size": s})
        disks.append({"type": "disk", "id": f"disk/by-path/slot-{n}", "name": f"sd{n}",
                      "size": size, "extra": [], "volumes": vols})
    return disks


@settings(max_examples=60, deadline=None)
@given(fuel_disks())
def test_exactly_sized_fuel_disks_always_fit(spaces):
    doc = {"ks_meta": {"pm_data": {"ks_spaces": spaces, "kernel_params": ""},
                       "image_data": {"/": {"uri": "http://h/root.img", "format": "ext4",
                                            "container": "raw"}}}}
    machine = inv_mod.from_document({"disks": [
        {"name": f"/dev/sd{n}", "size": s["size"] * MiB,
         "by_path": f"/dev/disk/by-path/slot-{n}"} for n, s in enumerate(spaces)]})
    planned = pipeline.build_plan(NailgunDriver(doc).layout(), machine)
    for space, disk in zip(spaces, planned.resolved.layout.disks):
        last_wanted = space["volumes"][-1]["size"]
        last_got = disk.partitions[-1].size.bytes // MiB
        assert last_wanted - SHRINK_LIMIT_MIB <= last_got <= last_wanted
        assert sum(p.size.bytes for p in disk.partitions) <= (space["size"] - 2) * MiB
