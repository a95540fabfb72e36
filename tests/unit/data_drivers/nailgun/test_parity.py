"""The nailgun data driver where it differed from fuel-agent: what is kept, picked,
refused and named, on documents shaped like Nailgun's."""

import copy
import json
import re

import pytest

from tests.unit.data_drivers.nailgun.test_driver import ROOT_PART, disk, fuel
from tests.unit.data_drivers.nailgun.test_fidelity import JOURNAL_GUID, OSD_GUID
from tests.unit.helpers import run_cli, sample

BOOT = {"type": "boot", "size": 300}
SATA_MIB = 476940        # samples/inventory/fuel-three-disks.json


def json_plan(tmp_path, doc, inv="fuel-three-disks"):
    rc, out, err = run_cli(tmp_path, doc, inv, extra=["--data_driver", "nailgun",
                                                     "--plan_format", "json"])
    assert rc == 0, err
    return json.loads(out)


def refused(tmp_path, doc, inv="fuel-three-disks"):
    rc, out, err = run_cli(tmp_path, doc, inv, extra=["--data_driver", "nailgun"])
    assert rc == 2 and out == "", (rc, out, err)
    return [line[4:] for line in err.splitlines() if line.startswith("  - ")]


# --- item 1: a kept Ceph journal is kept -------------------------------------------------

def ceph_node(journal_kept):
    journal = {"type": "partition", "name": "cephjournal", "mount": "none",
               "file_system": "none", "partition_guid": JOURNAL_GUID, "size": 20000,
               "keep_data": journal_kept}
    osd = {"type": "partition", "name": "ceph", "mount": "none", "file_system": "none",
           "partition_guid": OSD_GUID, "size": 400000, "keep_data": True}
    return fuel([disk("sda", SATA_MIB, [BOOT, ROOT_PART, journal]),
                 disk("sdb", SATA_MIB, [BOOT, osd]), disk("sdc", SATA_MIB, [BOOT, osd])])


def kept_partitions(plan):
    wipes = {s["args"]["disk"]: s["args"]["keep"] for s in plan["steps"] if s["kind"] == "wipe"}
    kept = {(s["args"]["disk"], s["args"]["number"]) for s in plan["steps"]
            if s["kind"] == "partition" and s["args"]["keep"]}
    return wipes, kept


def test_a_kept_ceph_journal_keeps_its_partitions_at_fuel_agents_offsets(tmp_path):
    plan = json_plan(tmp_path, ceph_node(journal_kept=True))
    wipes, kept = kept_partitions(plan)
    # Two OSDs on one journal volume: two journal partitions (sda4, sda5), kept with the OSDs.
    assert wipes == {"/dev/sda": [4, 5], "/dev/sdb": [3], "/dev/sdc": [3]}
    assert kept == {("/dev/sda", 4), ("/dev/sda", 5), ("/dev/sdb", 3), ("/dev/sdc", 3)}
    sda = plan["layout"]["disks"][0]["partitions"]
    MiB = 1 << 20
    # bios_grub 24, UEFI 200, / 2000, then 20000 / 2 MiB per journal: fuel-agent's offsets.
    assert [(p["device"], p["offset"] // MiB, p["size"] // MiB) for p in sda[3:]] == [
        ("/dev/sda4", 1 + 24 + 200 + 2000, 10000), ("/dev/sda5", 1 + 24 + 200 + 2000 + 10000,
                                                    10000)]


def test_a_kept_osd_keeps_the_journals_its_data_needs(tmp_path):
    """The document does not say which journal partition is whose: all are kept."""
    wipes, kept = kept_partitions(json_plan(tmp_path, ceph_node(journal_kept=False)))
    assert wipes["/dev/sda"] == [4, 5]


# --- item 2: several disks behind one extra link: id and name break the tie ---------------

SHARED_WWN = "0x5002538e00000001"       # udev gave both NVMe disks this one
NVME = [{"name": f"/dev/nvme{n}n1", "size": 512110190592, "model": "SAMSUNG MZVLB512HAJQ",
         "serial": f"S4GENX0N{n}0000{n}", "wwn": SHARED_WWN, "rotational": False,
         "by_path": f"/dev/disk/by-path/pci-0000:0{n + 4}:00.0-nvme-1"} for n in (0, 1)]
SATA_DISK = {"name": "/dev/sda", "size": 500107837440, "serial": "Z3T00ABC",
             "wwn": "0x5000c500a1b2c300", "rotational": True,
             "by_path": "/dev/disk/by-path/pci-0000:00:1f.2-ata-1"}
NVME_MIB = 488386


def nvme_space(n, ident):
    """An NVMe disk space as Nailgun wrote it, its extra link the shared wwn one."""
    return disk(ident or f"nvme{n}n1", NVME_MIB,
                [BOOT, {"type": "partition", "mount": f"/srv/nvme{n}", "file_system": "xfs",
                        "size": 100000}],
                name=f"nvme{n}n1", extra=[f"disk/by-id/wwn-{SHARED_WWN}"])


NVME1_PATH = "disk/by-path/pci-0000:05:00.0-nvme-1"


@pytest.mark.parametrize("ident, rule", [
    (NVME1_PATH, f"by_path='/dev/{NVME1_PATH}'"),
    (None, "name='/dev/nvme1n1'"),          # id as fuel-agent's fixtures have it: the name
])
def test_disks_sharing_an_extra_link_are_told_apart_by_id_and_name(tmp_path, ident, rule):
    doc = fuel([disk("sda", SATA_MIB, [BOOT, {"type": "raid", "mount": "/boot", "size": 200},
                                       ROOT_PART]),
                nvme_space(1, ident), nvme_space(0, None)])
    plan = json_plan(tmp_path, doc, {"inventory": {"disks": [SATA_DISK] + NVME}})
    disks = {d["device"]: d["matched_by"] for d in plan["layout"]["disks"]}
    shared = f"by_id='/dev/disk/by-id/wwn-{SHARED_WWN}'"
    assert disks["/dev/nvme1n1"] == f"{shared}, tie broken by {rule}"
    assert disks["/dev/nvme0n1"] == f"{shared}, tie broken by name='/dev/nvme0n1'"
    assert f"ks_spaces[1] (nvme1n1): {shared} matches 2 disks (/dev/nvme0n1, /dev/nvme1n1); " \
           f"{rule} picked /dev/nvme1n1" in plan["warnings"]


# --- item 3: /boot on NVMe disks only is refused, as fuel-agent refused it -----------------

def os_disk(name, size, extra_volumes=(), **space):
    """A disk space as Nailgun writes one for an OS disk: boot, a /boot member, a pv of os."""
    return dict(disk(name, size, [BOOT, {"type": "raid", "mount": "/boot", "size": 200},
                                  {"type": "pv", "vg": "os", "lvm_meta_size": 64,
                                   "size": 100000}, *extra_volumes]), **space)


OS_VG = {"type": "vg", "id": "os", "volumes": [
    {"type": "lv", "name": "root", "mount": "/", "file_system": "ext4", "size": 90000},
    {"type": "lv", "name": "swap", "mount": "swap", "file_system": "swap", "size": 4096}]}


def test_boot_on_nvme_disks_only_is_refused(tmp_path):
    doc = fuel([os_disk("nvme0n1", NVME_MIB), os_disk("nvme1n1", NVME_MIB), OS_VG])
    inv = {"inventory": {"disks": [dict(d, wwn=None) for d in NVME]}}
    (problem,) = refused(tmp_path, doc, inv)
    assert problem.startswith("ks_spaces[0] (nvme0n1) volumes[1]: /boot is on NVMe disks only")
    assert "fuel-agent refused this document too" in problem
    # With /boot on a SATA disk as well, the NVMe members are mirrors of it: planned.
    doc = fuel([os_disk("sda", SATA_MIB), os_disk("nvme0n1", NVME_MIB), OS_VG])
    plan = json_plan(tmp_path, doc, {"inventory": {"disks": [SATA_DISK, NVME[0]]}})
    assert plan["layout"]["raids"][0]["members"] == ["/dev/sda3", "/dev/nvme0n1p3"]


# --- item 7: with / on a fake RAID, /boot is there only ----------------------------------

def test_boot_goes_on_the_fake_raid_that_holds_the_os_only(tmp_path):
    """fuel-agent's fixture: sda and sdb with /boot members and a partition each, the firmware
    RAID md123 with a /boot member and VG os: fuel-agent made /boot on md123p3 alone."""
    sata = [dict(SATA_DISK, name=f"/dev/sd{c}", serial=f"Z3T00AB{c}", wwn=None,
                 by_path=f"/dev/disk/by-path/pci-0000:00:1f.2-ata-{n}")
            for n, c in enumerate("ab", 1)]
    fake_raid = {"name": "/dev/md123", "size": 2 * SATA_DISK["size"], "model": "fake_raid"}
    doc = fuel([disk("sda", SATA_MIB, [BOOT, {"type": "raid", "mount": "/boot", "size": 200},
                                       {"type": "partition", "mount": "/var", "size": 200,
                                        "file_system": "ext4"}], extra=["sda"]),
                disk("sdb", SATA_MIB, [BOOT, {"type": "raid", "mount": "/boot", "size": 200},
                                       {"type": "partition", "mount": "/tmp", "size": 200,
                                        "file_system": "ext2"}], extra=["sdb"]),
                os_disk("md123", 2 * SATA_MIB, extra=["md123"]), OS_VG])
    plan = json_plan(tmp_path, doc, {"inventory": {"disks": sata + [fake_raid]}})
    layout = plan["layout"]
    assert layout["raids"] == []
    fss = {fs["mount"]: fs["device"] for fs in layout["filesystems"] if fs.get("mount")}
    assert (fss["/boot"], fss["/var"], fss["/tmp"]) == ("/dev/md123p3", "/dev/sda3", "/dev/sdb3")
    # Nothing for the other disks' /boot volumes: their partitions are where fuel-agent made them.
    assert [p["device"] for p in layout["disks"][0]["partitions"]] == [
        "/dev/sda1", "/dev/sda2", "/dev/sda3"]


# --- item 5: a raid volume without a mount; the array for / -------------------------------

def test_a_raid_volume_without_a_mount_is_a_plain_partition_as_fuel_agent_made(tmp_path):
    spare = {"type": "raid", "mount": "none", "name": "raid-spare", "size": 1000}
    doc = fuel([disk("sda", SATA_MIB, [BOOT, {"type": "raid", "mount": "/boot", "size": 200},
                                       ROOT_PART, spare]),
                disk("sdb", SATA_MIB, [BOOT, {"type": "raid", "mount": "/boot", "size": 200},
                                       dict(spare, keep_data=True)])])
    layout = json_plan(tmp_path, doc)["layout"]
    assert [r["device"] for r in layout["raids"]] == ["/dev/md/boot"]
    assert [(p["device"], p["type"], p["size"] >> 20) for d in layout["disks"]
            for p in d["partitions"] if p["size"] >> 20 == 1000] == [
        ("/dev/sda5", "linux", 1000), ("/dev/sdb4", "linux", 1000)]
    assert not {"/dev/sda5", "/dev/sdb4"} & {fs["device"] for fs in layout["filesystems"]}
    # keep_data on it keeps a partition, which fuel-agent did too.
    assert [p["keep"] for d in layout["disks"] for p in d["partitions"]
            if p["device"] in ("/dev/sda5", "/dev/sdb4")] == [False, True]


def test_the_raid1_for_root_is_named_after_its_mount(tmp_path):
    root = {"type": "raid", "mount": "/", "file_system": "ext4", "size": 20000}
    doc = fuel([disk("sda", SATA_MIB, [BOOT, root]), disk("sdb", SATA_MIB, [BOOT, root]),
                disk("sdc", SATA_MIB, [BOOT, dict(root, mount="/root", size=1000),
                                       {"type": "partition", "mount": "/srv", "size": 100}]),
                disk("sdd", SATA_MIB, [BOOT, dict(root, mount="/root", size=1000)])])
    inv = {"inventory": {"disks": [dict(SATA_DISK, name=f"/dev/sd{c}", wwn=None, by_path=None)
                                   for c in "abcd"]}}
    layout = json_plan(tmp_path, doc, inv)["layout"]
    fss = {fs["mount"]: fs["device"] for fs in layout["filesystems"]}
    assert (fss["/"], fss["/root"]) == ("/dev/md/root", "/dev/md/root-2")


# --- item 6: interface fields are checked -------------------------------------------------

def test_interface_fields_that_are_not_addresses_are_refused_at_their_place(tmp_path):
    doc = copy.deepcopy(sample("provision"))
    doc["interfaces"]["eth0"].update(mac_address="zz", ip_address="999.1.1.1", static="1")
    doc["interfaces"]["eth1"] = {"mac_address": "52:54:00:12:34:57", "static": "1",
                                 "ip_address": "192.168.0.7", "netmask": "255.0.255.0"}
    doc["interfaces"]["a" * 16] = {"mac_address": "52:54:00:12:34:58"}
    assert refused(tmp_path, doc) == [
        "interfaces: an interface name is 1 to 15 printable characters without blanks or '/'",
        "interfaces.eth0.mac_address: not a MAC address (six hex octets separated by colons, "
        "52:54:00:12:34:56)",
        "interfaces.eth0.ip_address: not an IPv4 address (10.20.0.7)",
        "interfaces.eth1.netmask: not an IPv4 netmask (255.255.255.0)"]
    doc["interfaces"] = {"eth1": dict(doc["interfaces"]["eth1"], netmask="255.255.0.0")}
    net = json_plan(tmp_path, doc)
    (step,) = [s for s in net["steps"] if s["kind"] == "configdrive"]
    assert step["args"]["network_data"]["networks"][0]["netmask"] == "255.255.0.0"


# --- item 8: the small ones ---------------------------------------------------------------

def test_a_disk_space_without_volumes_is_reported_at_its_place(tmp_path):
    doc = fuel([disk("sda", SATA_MIB, [BOOT, ROOT_PART]), disk("sdb", SATA_MIB, [])])
    del doc["ks_meta"]["pm_data"]["ks_spaces"][1]["volumes"]
    assert refused(tmp_path, doc) == [
        "ks_spaces[1] (sdb): a disk space needs a numeric size (MiB) and a volumes list"]


def test_a_refused_root_lv_is_not_also_reported_as_a_missing_mount(tmp_path):
    lvs = copy.deepcopy(OS_VG)
    lvs["volumes"][0]["keep_data"] = True           # the os VG is not kept: refused
    doc = fuel([os_disk("sda", SATA_MIB), os_disk("sdb", SATA_MIB), lvs])
    (problem,) = refused(tmp_path, doc)
    assert problem.startswith("ks_spaces[2] (os) volumes[0]: keep_data on a logical volume")


def test_a_negative_disk_size_is_logged_as_it_is(tmp_path):
    doc = fuel([disk("sda", SATA_MIB, [BOOT, ROOT_PART]), disk("sdb", -1, [BOOT])])
    rc, _, err = run_cli(tmp_path, doc, "fuel-three-disks", extra=["--data_driver", "nailgun"])
    assert rc == 0 and "ks_spaces[1] (sdb): size -1 MiB, disk not used\n" in err, err


def test_fractional_sizes_are_refused_as_fuel_agent_refused_them(tmp_path):
    doc = fuel([disk("sda", SATA_MIB, [BOOT, dict(ROOT_PART, size=2000.5),
                                       {"type": "pv", "vg": "os", "size": 1000.0}]),
                disk("sdb", SATA_MIB + 0.25, [BOOT, {"type": "partition", "mount": "/srv",
                                                     "size": 100}])])
    assert refused(tmp_path, doc) == [
        "ks_spaces[0] (sda) volumes[1]: size 2000.5 MiB is not a whole number of MiB "
        "(fuel-agent's schema required integers)",
        "ks_spaces[1] (sdb): size 476940.25 MiB is not a whole number of MiB (fuel-agent's "
        "schema required integers)"]


# --- item 4: every message names Fuel's place, never a native path or an internal id -----

INTERNAL = re.compile(r"\$\.|'(d[0-9]+-|lv-|vg-|md-)")


def fuel_places_only(problems):
    assert problems and not [p for p in problems if INTERNAL.search(p)], problems
    return problems


SRV = {"type": "partition", "mount": "/srv", "file_system": "xfs", "size": 100}


@pytest.mark.parametrize("srv, expected", [
    (dict(SRV, file_system="zfs"), "ks_spaces[0] (sda) volumes[2]: file_system 'zfs' is not "
                                   "one provision makes (ext2, ext3, ext4, xfs, vfat, btrfs, "
                                   "swap, jfs, ntfs, reiserfs)"),
    (dict(SRV, mount="srv"), "ks_spaces[0] (sda) volumes[2].mount: 'srv' is not valid here: "
                             "expected an absolute path such as /var/lib"),
    (dict(SRV, disk_label="a-label-too-long-for-any"),
     "ks_spaces[0] (sda) volumes[2].disk_label: longer than 16 characters"),
    (dict(SRV, size=10 ** 20), "ks_spaces[0] (sda) volumes[2]: size larger than any disk "
                               "(8 EiB)"),
])
def test_what_the_native_checks_refuse_is_named_at_fuels_place(tmp_path, srv, expected):
    doc = fuel([disk("sda", SATA_MIB, [BOOT, ROOT_PART, srv])])
    assert fuel_places_only(refused(tmp_path, doc)) == [expected]


def test_an_image_onto_kept_data_names_the_kept_volume(tmp_path):
    doc = fuel([os_disk("sda", SATA_MIB), os_disk("sdb", SATA_MIB, [SRV]), copy.deepcopy(OS_VG)])
    pm = doc["ks_meta"]["pm_data"]["ks_spaces"]
    pm[1]["volumes"][3]["keep_data"] = True          # /srv on sdb
    pm[0]["volumes"][2]["keep_data"] = True          # a pv of os: the VG and root are kept
    doc["ks_meta"]["image_data"]["/srv"] = {"uri": "http://10.20.0.2:8080/srv.img",
                                            "format": "xfs", "container": "raw"}
    assert fuel_places_only(refused(tmp_path, doc)) == [
        "ks_meta.image_data['/']: ks_spaces[2] (os) volumes[0] is in a volume group kept with "
        "keep_data, so no image can be written to it",
        "ks_meta.image_data['/srv']: ks_spaces[1] (sdb) volumes[3] keeps its data (keep_data), "
        "so no image can be written to it"]


def test_duplicates_name_fuels_places(tmp_path):
    lvs = copy.deepcopy(OS_VG)
    lvs["volumes"].append({"type": "lv", "name": "root.", "mount": "/opt", "size": 100})
    doc = fuel([os_disk("sda", SATA_MIB), os_disk("sdb", SATA_MIB), lvs,
                dict(copy.deepcopy(OS_VG), volumes=[])])
    assert fuel_places_only(refused(tmp_path, doc)) == [
        "ks_spaces[3] (os): a second vg space for volume group 'os' (the first is "
        "ks_spaces[2] (os))"]
    doc["ks_meta"]["pm_data"]["ks_spaces"][3] = disk("x", SATA_MIB, [BOOT, SRV],
                                                     extra=["disk/by-path/pci-0000:00:1f.2-ata-1"])
    rc, _, err = run_cli(tmp_path, doc, "fuel-three-disks", extra=["--data_driver", "nailgun"])
    (problem,) = fuel_places_only([line for line in err.splitlines() if line.startswith("  - ")])
    assert rc == 3 and problem == "  - ks_spaces[3] (x): /dev/sda is already matched by " \
                                  "ks_spaces[0] (sda)"
