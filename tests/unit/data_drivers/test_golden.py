"""Golden tests: each Fuel and Ironic sample through `provision --dry_run --plan_format json`,
checked field by field (partition types and sizes, raid members, LV names, image targets)."""

import json

import pytest

from tests.unit.helpers import run_cli, sample

MiB = 1 << 20
GiB = 1 << 30


def dry_run(tmp_path, name, driver, inv):
    rc, out, err = run_cli(tmp_path, sample(name), inv,
                           extra=["--data_driver", driver, "--plan_format", "json"])
    assert rc == 0, err
    return json.loads(out)


def parts(layout):
    return {d["device"]: [(p["device"], p["type"], p["size"] // MiB) for p in d["partitions"]]
            for d in layout["disks"]}


def by(items, key):
    return {i[key]: i for i in items}


FUEL_CASES = {
    # sample: (inventory, disk prefix, disk MiB, (os pv sizes), (image pv sizes), root LV, swap LV)
    "provision": ("fuel-three-disks", "/dev/sd", 476940, (476440, 238220), (238220, 476440),
                  476440 + 238220 - 128 - 16384, 16384),
    "provision-vm": ("three-disks", "/dev/vd", 4096, (3596, 1796), (1800, 3596),
                     3596 + 1796 - 128 - 512, 512),
}


@pytest.mark.parametrize("name", sorted(FUEL_CASES))
def test_fuel_sample(tmp_path, name):
    inv, pre, disk_mib, os_pvs, image_pvs, root_mib, swap_mib = FUEL_CASES[name]
    plan = dry_run(tmp_path, name, "nailgun", inv)
    layout = plan["layout"]
    a, b, c = (f"{pre}{x}" for x in "abc")
    assert [d["device"] for d in layout["disks"]] == [a, b, c]
    # Found by the first extra by-id link of each space, as fuel-agent did; nothing to warn about.
    assert [d["matched_by"].split("=")[0] for d in layout["disks"]] == ["by_id"] * 3
    assert plan["warnings"] == []
    assert all(d["table"] == "gpt" and d["size"] == disk_mib * MiB for d in layout["disks"])
    assert parts(layout) == {
        # fuel-agent's order: bios_grub, UEFI, the volumes, the configdrive last.
        a: [(a + "1", "bios_grub", 24), (a + "2", "linux", 200), (a + "3", "raid", 200),
            (a + "4", "lvm", os_pvs[0]), (a + "5", "linux", 20)],
        b: [(b + "1", "bios_grub", 24), (b + "2", "linux", 200), (b + "3", "raid", 200),
            (b + "4", "lvm", os_pvs[1]), (b + "5", "lvm", image_pvs[0])],
        c: [(c + "1", "bios_grub", 24), (c + "2", "linux", 200), (c + "3", "raid", 200),
            (c + "4", "lvm", image_pvs[1])],
    }
    (boot,) = layout["raids"]
    assert boot["device"] == "/dev/md/boot" and boot["level"] == 1
    assert boot["metadata"] == "1.0"
    assert boot["members"] == [a + "3", b + "3", c + "3"]
    vgs = by(layout["volume_groups"], "name")
    assert vgs["os"]["pvs"] == [a + "4", b + "4"]
    assert vgs["image"]["pvs"] == [b + "5", c + "4"]
    assert [(lv["name"], lv["device"], lv["size"] // MiB)
            for lv in vgs["os"]["logical_volumes"]] == [
        ("root", "/dev/os/root", root_mib), ("swap", "/dev/os/swap", swap_mib)]
    (glance,) = vgs["image"]["logical_volumes"]
    assert glance["device"] == "/dev/image/glance"
    assert glance["size"] // MiB == image_pvs[0] + image_pvs[1] - 128
    fss = by(layout["filesystems"], "device")
    assert fss["/dev/md/boot"]["type"] == "ext2" and fss["/dev/md/boot"]["mount"] == "/boot"
    assert fss["/dev/os/root"]["type"] == "ext4" and fss["/dev/os/root"]["mount"] == "/"
    assert fss["/dev/os/swap"]["type"] == "swap"
    assert fss["/dev/image/glance"]["type"] == "xfs"
    assert fss["/dev/image/glance"]["mount"] == "/var/lib/glance"
    steps = {s["kind"]: s for s in plan["steps"]}
    image = steps["write_image"]["args"]
    assert image["device"] == "/dev/os/root"
    assert steps["bootloader"]["args"]["boot_mode"] == "bios"
    assert steps["bootloader"]["args"]["targets"] == [a, b, c]
    assert "console=ttyS0,115200n8" in steps["bootloader"]["args"]["kernel_params"]
    assert steps["configdrive"]["args"]["device"] == a + "5"
    assert steps["configdrive"]["args"]["format"] == "config-2"
    # Nothing makes a filesystem on the image's target: the image brings it.
    assert not any(s["kind"] == "mkfs" and s["args"]["device"] == "/dev/os/root"
                   for s in plan["steps"])


def test_ironic_partition_image_sample(tmp_path):
    plan = dry_run(tmp_path, "ironic-partition-image", "ironic", "three-disks")
    layout = plan["layout"]
    assert parts(layout) == {"/dev/vda": [
        ("/dev/vda1", "bios_grub", 1), ("/dev/vda2", "linux", 1024), ("/dev/vda3", "swap", 256),
        ("/dev/vda4", "linux", 64), ("/dev/vda5", "linux", 2048)]}
    fss = by(layout["filesystems"], "device")
    assert fss["/dev/vda5"]["mount"] == "/"
    assert fss["/dev/vda2"]["label"] == "ephemeral0"
    steps = {s["kind"]: s for s in plan["steps"]}
    assert steps["write_image"]["args"]["device"] == "/dev/vda5"
    assert steps["configdrive"]["args"]["device"] == "/dev/vda4"
    assert steps["configdrive"]["args"]["meta_data"]["hostname"] == "ironic-node-1"
    assert steps["bootloader"]["args"]["targets"] == ["/dev/vda"]


def test_ironic_whole_disk_sample(tmp_path):
    plan = dry_run(tmp_path, "ironic-whole-disk", "ironic", "three-disks")
    (disk,) = plan["layout"]["disks"]
    assert disk["device"] == "/dev/vdb" and disk["partitions"] == []
    assert [s["kind"] for s in plan["steps"]] == ["wipe", "write_image", "bootloader"]
    assert plan["steps"][1]["args"]["device"] == "/dev/vdb"
    # UEFI, Ironic's default: the image's own loader gets its NVRAM entry, as IPA makes it
    assert plan["steps"][2]["args"]["type"] == "image"
    assert plan["steps"][2]["args"]["boot_mode"] == "uefi"
    assert plan["steps"][2]["args"]["targets"] == ["/dev/vdb"]


def test_ironic_layout_sample(tmp_path):
    plan = dry_run(tmp_path, "ironic-layout", "ironic", "three-disks")
    layout = plan["layout"]
    raids = by(layout["raids"], "device")
    assert raids["/dev/md/os"]["members"] == ["/dev/vda3", "/dev/vdb3"]
    assert [lv["name"] for lv in layout["volume_groups"][0]["logical_volumes"]] == [
        "root", "swap"]
    # The configdrive partition Ironic's configdrive needs is added at the end of the first disk.
    assert parts(layout)["/dev/vda"][-1] == ("/dev/vda4", "linux", 64)
    steps = {s["kind"]: s for s in plan["steps"]}
    assert steps["write_image"]["args"]["device"] == "/dev/os/root"
    assert steps["configdrive"]["args"]["device"] == "/dev/vda4"
