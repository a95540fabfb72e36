"""bcache devices (issue 56; curtin's bcache action): the schema, validation with located
errors, and the plan read back from the dry run's JSON: the bcache device usable as a
physical volume, a filesystem and an encrypted volume's device, one cache set shared, the
block size of the set, the check of the image, and the initramfs rebuilt."""

import json

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline
from tests.unit.helpers import mutate, run_cli

GiB = 1 << 30


def disk(name, serial, logical=512):
    return {"name": name, "size": 10 * GiB, "serial": serial, "model": "QEMU", "vendor": "QEMU",
            "rotational": True, "hctl": None, "by_path": None, "by_id": [], "wwn": None,
            "logical_block_size": logical, "physical_block_size": logical}


MACHINE = {"inventory": {"disks": [disk("/dev/sda", "A"), disk("/dev/sdb", "B"),
                                   disk("/dev/sdc", "C"), disk("/dev/nvme0n1", "N")]}}
TAR = {"uri": "http://images.example/root.tar.gz", "format": "tar", "target": "/",
       "allow_no_checksum": True}


def layout():
    """Root on LVM on a bcache of a RAID1, cached by an NVMe partition in writeback mode; /srv
    on a second bcache device of the same cache set; /boot outside bcache."""
    return {"version": 1,
            "disks": [
                {"id": "a", "match": {"serial": "A"}, "partitions": [
                    {"id": "bios", "size": "1MiB", "type": "bios_grub"},
                    {"id": "boot", "size": "1GiB"},
                    {"id": "a2", "size": "remaining", "type": "raid"}]},
                {"id": "b", "match": {"serial": "B"}, "partitions": [
                    {"id": "b1", "size": "1GiB"},
                    {"id": "b2", "size": "remaining", "type": "raid"}]},
                {"id": "c", "match": {"serial": "C"}},
                {"id": "n", "match": {"serial": "N"}, "partitions": [
                    {"id": "n1", "size": "4GiB"}]}],
            "raids": [{"id": "md", "name": "data", "level": 1, "members": ["a2", "b2"]}],
            "bcache": [
                {"id": "cached", "name": "root", "backing_device": "md", "cache_device": "n1",
                 "cache_mode": "writeback"},
                {"id": "srv", "backing_device": "c", "cache_device": "n1"}],
            "volume_groups": [{"id": "vg", "name": "vg0", "pvs": ["cached"],
                               "logical_volumes": [{"id": "lvroot", "name": "root",
                                                    "size": "remaining"}]}],
            "filesystems": [{"device": "boot", "type": "ext4", "mount": "/boot"},
                            {"device": "lvroot", "type": "ext4", "mount": "/"},
                            {"device": "srv", "type": "xfs", "mount": "/srv"}],
            "images": [TAR],
            "bootloader": {"boot_mode": "bios", "targets": ["a"]}}


def dry_run(tmp_path, doc, machine=MACHINE):
    rc, out, err = run_cli(tmp_path, doc, machine, extra=["--plan_format", "json"])
    return rc, (json.loads(out) if rc == 0 else None), err


def problems(doc):
    disks = [inv_mod.normalize(d) for d in MACHINE["inventory"]["disks"]]
    with pytest.raises(InputError) as exc:
        pipeline.build_plan(NativeDriver(doc).layout(), disks)
    return [str(p) for p in exc.value.problems]


def of_kind(plan, kind):
    return [s["args"] for s in plan["steps"] if s["kind"] == kind]


def test_bcache_over_raid1_under_lvm_plans_each_device_once(tmp_path):
    rc, plan, err = dry_run(tmp_path, layout())
    assert rc == 0, err
    kinds = [s["kind"] for s in plan["steps"]]
    # made after the array it stands on, before the physical volume on it
    assert kinds.index("md_create") < kinds.index("bcache_create") < kinds.index("pv_create")
    root, srv = of_kind(plan, "bcache_create")
    assert root == {"device": "/dev/bcache/by-label/root", "name": "root",
                    "backing": "/dev/md/data", "cache": "/dev/nvme0n1p1",
                    "cache_mode": "writeback", "block_size": 512, "format_cache": True}
    # the second device of the set attaches to it: the cache is not formatted twice
    assert (srv["device"], srv["backing"], srv["cache"], srv["cache_mode"],
            srv["format_cache"]) == ("/dev/bcache/by-label/srv", "/dev/sdc", "/dev/nvme0n1p1",
                                     "writethrough", False)
    assert of_kind(plan, "pv_create") == [{"device": "/dev/bcache/by-label/root"}]
    mkfs = {a["device"]: a["fs_type"] for a in of_kind(plan, "mkfs")}
    assert mkfs["/dev/bcache/by-label/srv"] == "xfs"
    (fstab,) = of_kind(plan, "fstab")
    assert "/dev/bcache/by-label/srv" in [e["device"] for e in fstab["entries"]]
    # both are mounted at boot: the image is checked for bcache-tools, its initramfs rebuilt
    (check,) = of_kind(plan, "bcache_boot")
    assert check["devices"] == ["/dev/bcache/by-label/root", "/dev/bcache/by-label/srv"]
    (boot,) = of_kind(plan, "bootloader")
    assert boot["initramfs"] == "rebuild"
    assert kinds.index("bcache_boot") < kinds.index("bootloader")
    shown = {b["id"]: b for b in plan["layout"]["bcache"]}
    assert shown["srv"]["size"] == 10 * GiB - 8192        # the backing less its superblock
    assert shown["cached"]["cache_mode"] == "writeback"


def test_a_backing_only_bcache_and_luks_on_bcache(tmp_path):
    doc = mutate(layout(), lambda d: d["bcache"].__setitem__(1, {
        "id": "srv", "backing_device": "c"}))
    doc["encrypted"] = [{"id": "crypt", "device": "srv", "unlock": {"tpm2": {}}}]
    doc["recovery"] = {"age_recipients": [
        "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"]}
    doc["filesystems"][2]["device"] = "crypt"
    rc, plan, err = dry_run(tmp_path, doc)
    assert rc == 0, err
    srv = of_kind(plan, "bcache_create")[1]
    assert (srv["cache"], srv["cache_mode"], srv["format_cache"]) == (None, "none", False)
    (luks,) = of_kind(plan, "luks_format")
    assert luks["device"] == "/dev/bcache/by-label/srv"
    kinds = [s["kind"] for s in plan["steps"]]
    assert kinds.index("bcache_create") < kinds.index("luks_format")


def test_a_cache_set_takes_the_largest_block_of_its_devices(tmp_path):
    machine = {"inventory": {"disks": [disk("/dev/sda", "A"), disk("/dev/sdb", "B"),
                                       disk("/dev/sdc", "C"),
                                       disk("/dev/nvme0n1", "N", logical=4096)]}}
    rc, plan, err = dry_run(tmp_path, layout(), machine)
    assert rc == 0, err
    assert [b["block_size"] for b in of_kind(plan, "bcache_create")] == [4096, 4096]


@pytest.mark.parametrize("change, where, says", [
    (lambda d: d["bcache"][0].update(backing_device="nope"), "$.bcache[0]",
     "backing_device 'nope' is not a usable device here (unknown id)"),
    (lambda d: d["bcache"][0].update(cache_device="a"), "$.bcache[0]",
     "cache_device 'a' is not a usable device here (disk with partitions)"),
    (lambda d: d["bcache"][1].update(backing_device="n1", cache_device="c"), "$.bcache[0]",
     "cache_device 'n1' is a backing device"),
    (lambda d: d["bcache"][1].update(name="root"), "$.bcache[1]",
     "duplicate bcache name 'root'"),
    (lambda d: d["bcache"].__setitem__(1, {"id": "srv", "backing_device": "c",
                                           "cache_mode": "writeback"}), "$.bcache[1]",
     "cache_mode 'writeback' without a cache_device"),
    (lambda d: d["filesystems"].append({"device": "c", "type": "ext4", "mount": "/data"}),
     "$.filesystems[3]", "'c' is used by more than one raid, bcache"),
    (lambda d: d["filesystems"][0].update(device="srv") or d["filesystems"].pop(2),
     "$.filesystems[0]", "/boot is on bcache 'srv': grub and firmware read no bcache"),
    (lambda d: d["bcache"].append({"id": "md", "backing_device": "b1"}), "$.bcache[2]",
     "duplicate id 'md'"),
])
def test_validation_names_where(change, where, says):
    found = problems(mutate(layout(), change))
    assert any(p.startswith(f"{where}: {says}") for p in found), found


def test_a_kept_partition_is_no_bcache_device():
    def keep_b1(d):
        d["disks"][1]["partitions"][0]["keep"] = True
        d["bcache"][1]["backing_device"] = "b1"
    found = problems(mutate(layout(), keep_b1))
    assert any(p.startswith("$.bcache[1]: backing_device 'b1' is kept") for p in found), found


def test_root_on_bcache_without_a_boot_partition_is_refused():
    def root_on_bcache(d):
        d["filesystems"] = [{"device": "srv", "type": "ext4", "mount": "/"}]
    found = problems(mutate(layout(), root_on_bcache))
    assert any(p.startswith("$.filesystems[0]: / is on bcache 'srv'") for p in found), found


@pytest.mark.parametrize("field, value, says", [
    ("cache_mode", "fast", "$.bcache[0].cache_mode: must be one of"),
    ("backing", "md", "$.bcache[0]: unknown field 'backing'"),
    ("name", "a b", "$.bcache[0].name: 'a b' is not valid here"),
])
def test_schema_names_where(tmp_path, field, value, says):
    rc, _, err = dry_run(tmp_path, mutate(layout(), lambda d: d["bcache"][0].update(
        {field: value})))
    assert rc == 2 and says in err, err


def with_partitions(d):
    """/srv's bcache device partitioned (curtin's bcache-partitions): an xfs and a PV on it."""
    d["bcache"][1].update(table="gpt", partitions=[{"id": "srv1", "size": "2GiB"},
                                                   {"id": "srv2", "size": "remaining"}])
    d["filesystems"][2]["device"] = "srv1"
    d["volume_groups"].append({"id": "vg2", "name": "data", "pvs": ["srv2"],
                               "logical_volumes": [{"id": "lvdata", "size": "1GiB"}]})


def test_a_partition_table_on_a_bcache_device(tmp_path):
    rc, plan, err = dry_run(tmp_path, mutate(layout(), with_partitions))
    assert rc == 0, err
    steps = [(s["kind"], s["args"]) for s in plan["steps"]]
    kinds = [k for k, _ in steps]
    at = kinds.index("bcache_create", kinds.index("bcache_create") + 1)
    # made right after its device, before LVM: its own table, partitions and settle
    assert kinds[at:at + 5] == ["bcache_create", "partition_table", "partition", "partition",
                                "settle"]
    assert steps[at + 1][1] == {"disk": "/dev/bcache/by-label/srv", "label": "gpt"}
    first, second = steps[at + 2][1], steps[at + 3][1]
    assert (first["device"], first["offset"], first["size"]) == (
        "/dev/bcache/by-label/srv1", 1 << 20, 2 * GiB)
    # the rest of the 10 GiB disk less bcache's 8 KiB, on whole MiB, less GPT's backup
    assert second["device"] == "/dev/bcache/by-label/srv2"
    assert second["offset"] + second["size"] <= 10 * GiB - 8192 - 16896
    assert steps[at + 4][1]["devices"] == ["/dev/bcache/by-label/srv1",
                                           "/dev/bcache/by-label/srv2"]
    assert kinds.index("pv_create") > at + 4
    pvs = [a["device"] for k, a in steps if k == "pv_create"]
    assert "/dev/bcache/by-label/srv2" in pvs
    (check,) = of_kind(plan, "bcache_boot")
    assert check["devices"] == ["/dev/bcache/by-label/root", "/dev/bcache/by-label/srv"]


@pytest.mark.parametrize("change, where, says", [
    (lambda d: d["filesystems"][2].update(device="srv"), "$.filesystems[2]",
     "device 'srv' is not a usable device here (bcache device with partitions)"),
    (lambda d: d["bcache"][1]["partitions"][0].update(keep=True),
     "$.bcache[1].partitions[0]", "a partition of bcache 'srv' is kept"),
    (lambda d: d["bcache"][1]["partitions"][0].update(type="esp"),
     "$.bcache[1].partitions[0]", "a esp partition on a bcache device"),
    (lambda d: d["bcache"][0].update(name="srv1"), "$.bcache[0]",
     "name 'srv1' is also the link of partition 'srv1' of bcache 'srv'"),
    (lambda d: d["raids"][0].update(members=["a2", "srv2"]) or d["volume_groups"].pop(),
     "$.raids[0]", "'srv2' is a partition of bcache 'srv': arrays and bcache devices are made"),
])
def test_partitions_on_bcache_are_refused_where(change, where, says):
    found = problems(mutate(mutate(layout(), with_partitions), change))
    assert any(p.startswith(f"{where}: {says}") for p in found), found
