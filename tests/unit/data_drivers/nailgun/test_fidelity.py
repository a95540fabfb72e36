"""The nailgun data driver against what real Fuel documents carry:
keep_data, Nailgun's leftovers, SSH keys as Nailgun quotes them, what fuel-agent refused."""

import copy
import json

import pytest

from provision_agent.data_drivers.nailgun.driver import NailgunDriver
from tests.unit.data_drivers.nailgun.test_driver import (
    ROOT_IMAGE,
    ROOT_PART,
    disk,
    fuel,
    native,
    plan,
    problems,
)
from tests.unit.helpers import run_cli, sample

# --- keep_data: nothing Fuel keeps is formatted ----------------------------

KEPT_DOC_SPACES = [
    disk("vda", 4096, [{"type": "boot", "size": 300},
                       {"type": "raid", "mount": "/boot", "size": 200},
                       {"type": "pv", "vg": "os", "lvm_meta_size": 64, "size": 3596}]),
    disk("vdb", 4096, [{"type": "boot", "size": 300},
                       {"type": "pv", "vg": "image", "lvm_meta_size": 64, "size": 1800,
                        "keep_data": True},
                       {"type": "partition", "mount": "/srv", "size": 1000}]),
    disk("vdc", 4096, [{"type": "boot", "size": 300},
                       {"type": "pv", "vg": "image", "lvm_meta_size": 64, "size": 1800}]),
    {"type": "vg", "id": "os", "volumes": [
        {"type": "lv", "name": "root", "mount": "/", "file_system": "ext4", "size": 3000}]},
    {"type": "vg", "id": "image", "volumes": [
        {"type": "lv", "name": "glance", "mount": "/var/lib/glance", "file_system": "xfs",
         "size": 3400, "keep_data": True}]},
]


def test_keep_data_on_a_pv_keeps_its_whole_volume_group(tmp_path):
    """fuel-agent's rule: the group is kept with every physical volume (vdc's too, whose own
    volume does not say keep_data) and logical volume; nothing of it is formatted, and it is
    mounted where it belongs in the target as fuel-agent's mount_target did, and in fstab.
    The rest (os, /srv) is made anew."""
    rc, out, err = run_cli(tmp_path, fuel(KEPT_DOC_SPACES), extra=[
        "--data_driver", "nailgun", "--plan_format", "json"])
    assert rc == 0, err
    doc = json.loads(out)
    steps = doc["steps"]
    kinds = [s["kind"] for s in steps]
    activate = steps[kinds.index("vg_activate")]["args"]
    assert activate == {"name": "image", "pvs": ["/dev/vdb3", "/dev/vdc3"], "lvs": ["glance"],
                        "devices": ["/dev/image/glance"]}
    assert [s["args"]["name"] for s in steps if s["kind"] == "vg_create"] == ["os"]
    assert not any(s["kind"] == "pv_create" and s["args"]["device"] in ("/dev/vdb3", "/dev/vdc3")
                   for s in steps)
    assert not any(s["kind"] in ("lv_create", "mkfs")
                   and "image" in json.dumps(s["args"]) for s in steps)
    mounts = [s["args"] for s in steps if s["kind"] == "mount"]
    glance = next(m for m in mounts if m["device"] == "/dev/image/glance")
    assert glance["mount_point"] == "/var/lib/glance"
    assert mounts.index(glance) > next(i for i, m in enumerate(mounts) if m["mount_point"] == "/")
    kept = {(s["args"]["disk"], s["args"]["number"]) for s in steps
            if s["kind"] == "partition" and s["args"]["keep"]}
    assert kept == {("/dev/vdb", 3), ("/dev/vdc", 3)}
    wipes = {s["args"]["disk"]: s["args"]["keep"] for s in steps if s["kind"] == "wipe"}
    assert wipes == {"/dev/vda": [], "/dev/vdb": [3], "/dev/vdc": [3]}
    assert any(s["kind"] == "mkfs" and s["args"]["device"] == "/dev/vdb4" for s in steps)
    fstab = next(s for s in steps if s["kind"] == "fstab")["args"]["entries"]
    assert {"device": "/dev/image/glance", "mount_point": "/var/lib/glance"}.items() <= \
        next(e for e in fstab if e["mount_point"] == "/var/lib/glance").items()


def test_keep_data_on_a_pv_keeps_its_group_when_no_vg_space_describes_it(tmp_path):
    """The group is kept all the same (it was refused with "partition 'd1-v1' is kept", an id
    Fuel never wrote): activated as it is, with the logical volumes it already has."""
    spaces = copy.deepcopy(KEPT_DOC_SPACES[:4])
    rc, out, err = run_cli(tmp_path, fuel(spaces), extra=[
        "--data_driver", "nailgun", "--plan_format", "json"])
    assert rc == 0, err
    steps = json.loads(out)["steps"]
    assert [s["args"]["name"] for s in steps if s["kind"] == "vg_activate"] == ["image"]
    assert [s["args"]["name"] for s in steps if s["kind"] == "vg_create"] == ["os"]


def test_keep_data_on_an_lv_alone_is_refused_naming_fuels_location(tmp_path):
    spaces = copy.deepcopy(KEPT_DOC_SPACES)
    spaces[3]["volumes"].append({"type": "lv", "name": "var", "mount": "/var", "size": 400,
                                 "keep_data": True})           # os VG not kept
    out = problems(fuel(spaces))
    assert [p.split(":")[0] for p in out] == ["ks_spaces[3] (os) volumes[1]"]
    assert "keep_data on a logical volume whose volume group is not kept" in out[0]
    # Through the CLI: exit 2 and no plan at all (so no wipe, no mkfs).
    rc, stdout, err = run_cli(tmp_path, fuel(spaces), extra=["--data_driver", "nailgun"])
    assert rc == 2 and stdout == ""
    assert "ks_spaces[3] (os) volumes[1]" in err and "volume group is not kept" in err


# --- keep_data on raid volumes: the md array kept, assembled, not re-created --------------

def raid_doc(mount="/srv/data", fs="ext4", kept_on=(0,), members=2):
    """A / partition on vda, and the raid volume of mount on the first `members` disks, with
    keep_data on the disks in kept_on; vdb also has a /srv partition (a disk with only a
    /boot volume is Nailgun's leftover, not used)."""
    vol = {"type": "raid", "mount": mount, "size": 500, **({"file_system": fs} if fs else {})}
    srv = {"type": "partition", "mount": "/srv", "file_system": "xfs", "size": 100}
    return fuel([disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART, dict(
                     vol, keep_data=0 in kept_on)]),
                 disk("vdb", 4096, [{"type": "boot", "size": 300}] + ([dict(
                     vol, keep_data=1 in kept_on)] if members > 1 else []) + [srv])])


def json_plan(tmp_path, doc):
    rc, out, err = run_cli(tmp_path, doc, extra=["--data_driver", "nailgun",
                                                 "--plan_format", "json"])
    assert rc == 0, err
    return json.loads(out)["steps"]


@pytest.mark.parametrize("mount,fs,name", [("/srv/data", "ext4", "srv-data"),
                                          ("/boot", "ext2", "boot")])
def test_keep_data_on_a_raid_volume_keeps_its_whole_array(tmp_path, mount, fs, name):
    """keep_data on one member (vda's) keeps the array with every member, vdb's too, as a
    kept pv keeps its group: the members' partitions stay (spared by the wipe, the tables
    edited around them), the array is assembled from them and not created, its filesystem
    is not made anew, and it is mounted where Fuel says and goes into fstab and
    mdadm.conf."""
    steps = json_plan(tmp_path, raid_doc(mount, fs))
    kinds = [s["kind"] for s in steps]
    assert "md_create" not in kinds
    (assemble,) = [s["args"] for s in steps if s["kind"] == "md_assemble"]
    assert assemble == {"device": f"/dev/md/{name}", "name": name, "level": 1,
                        "members": ["/dev/vda4", "/dev/vdb3"], "spares": [],
                        "on_member_failure": "fail"}
    assert not any(s["kind"] == "mkfs" and s["args"]["device"] == f"/dev/md/{name}"
                   for s in steps)
    assert [s["args"]["device"] for s in steps if s["kind"] == "mkfs"] == ["/dev/vdb4"]  # /srv
    kept = {s["args"]["device"] for s in steps if s["kind"] == "partition" and s["args"]["keep"]}
    assert kept == {"/dev/vda4", "/dev/vdb3"}
    wipes = {s["args"]["disk"]: s["args"]["keep"] for s in steps if s["kind"] == "wipe"}
    assert wipes == {"/dev/vda": [4], "/dev/vdb": [3]}
    assert kinds.index("md_assemble") < kinds.index("mount")
    (mounted,) = [s["args"] for s in steps if s["kind"] == "mount"
                  and s["args"]["mount_point"] == mount]
    assert (mounted["device"], mounted["fs_type"]) == (f"/dev/md/{name}", fs)
    fstab = next(s for s in steps if s["kind"] == "fstab")["args"]["entries"]
    assert any(e["device"] == f"/dev/md/{name}" and e["mount_point"] == mount for e in fstab)
    assert next(s for s in steps if s["kind"] == "mdadm_conf")["args"]["arrays"] == [
        f"/dev/md/{name}"]


def test_without_keep_data_the_raid_array_is_created_and_formatted(tmp_path):
    steps = json_plan(tmp_path, raid_doc(kept_on=()))
    assert [s["args"]["name"] for s in steps if s["kind"] == "md_create"] == ["srv-data"]
    assert "md_assemble" not in [s["kind"] for s in steps]
    assert sorted(s["args"]["device"] for s in steps if s["kind"] == "mkfs") == [
        "/dev/md/srv-data", "/dev/vdb4"]
    assert not any(s["kind"] == "partition" and s["args"]["keep"] for s in steps)


def test_a_kept_array_without_file_system_is_refused_its_type_would_be_a_guess():
    """A kept partition's filesystem type is checked on the disk before the first write; a
    kept array's cannot be (it is assembled during the run): fuel-agent's default is not
    guessed for it."""
    out = problems(raid_doc(fs=None, kept_on=(1,)))
    assert [p.split(":")[0] for p in out] == ["ks_spaces[0] (vda) volumes[2]"]
    assert "keep_data keeps the md array mounted at /srv/data" in out[0]
    assert "the default xfs would be a guess" in out[0] and "Give its file_system" in out[0]


def test_a_single_kept_raid_volume_is_a_kept_partition_under_the_partitions_rule():
    """One raid volume of a mount is a plain partition holding the filesystem (RAID1 needs
    two): kept as a partition is, its type checked on the disk by the preflight; a kept /
    without file_system is refused as a kept / partition is."""
    doc = native(raid_doc(fs=None, members=1))
    (part,) = [p for p in doc["disks"][0]["partitions"] if p.get("keep")]
    assert part["type"] == "raid" and doc["raids"] == []
    assert {"device": part["id"], "type": "xfs", "mount": "/srv/data"}.items() <= next(
        f for f in doc["filesystems"] if f["device"] == part["id"]).items()
    spaces = raid_doc(mount="/", fs=None, members=1)["ks_meta"]["pm_data"]["ks_spaces"]
    spaces[0]["volumes"].remove(ROOT_PART)
    out = problems(fuel(spaces))
    assert "keep_data keeps the filesystem mounted at /" in out[0]


def test_no_image_is_written_onto_a_kept_array():
    doc = raid_doc(mount="/srv/data")
    doc["ks_meta"]["image_data"]["/srv/data"] = dict(ROOT_IMAGE)
    out = problems(doc)
    assert out == ["ks_meta.image_data['/srv/data']: ks_spaces[0] (vda) volumes[2] is an md "
                   "array kept with keep_data, so no image can be written to it"]


def test_without_keep_data_the_same_document_plans():
    spaces = json.loads(json.dumps(KEPT_DOC_SPACES).replace('"keep_data": true', '"x": 0'))
    res = plan(fuel(spaces))
    assert [vg.name for vg in res.resolved.layout.volume_groups] == ["os", "image"]
    assert not any(vg.keep for vg in res.resolved.layout.volume_groups)


def test_disk_with_only_nailgun_leftovers_is_left_untouched(tmp_path):
    spaces = [disk("vda", 4096, [{"type": "boot", "size": 300},
                                 {"type": "raid", "mount": "/boot", "size": 200}, ROOT_PART]),
              disk("vdb", 4096, [{"type": "boot", "size": 300},
                                 {"type": "raid", "mount": "/boot", "size": 200},
                                 {"type": "lvm_meta_pool", "size": 64},
                                 {"type": "pv", "vg": "image", "size": 0}])]
    rc, out, err = run_cli(tmp_path, fuel(spaces), extra=["--data_driver", "nailgun",
                                                          "--plan_format", "json"])
    assert rc == 0, err
    plan_doc = json.loads(out)
    assert [d["device"] for d in plan_doc["layout"]["disks"]] == ["/dev/vda"]
    assert not any("/dev/vdb" in json.dumps(s["args"]) for s in plan_doc["steps"])
    assert plan_doc["layout"]["raids"] == []      # a single /boot member: a plain partition


def kept_doc(boot_on_vdb=True):
    keep = {"type": "partition", "mount": "/srv", "file_system": "xfs", "size": 500,
            "keep_data": True}
    vdb = [{"type": "boot", "size": 300}] + (
        [{"type": "raid", "mount": "/boot", "size": 200}] if boot_on_vdb else []) + [keep]
    return fuel([disk("vda", 4096, [{"type": "boot", "size": 300},
                                    {"type": "raid", "mount": "/boot", "size": 200}, ROOT_PART]),
                 disk("vdb", 4096, vdb)])


def test_kept_partition_is_placed_in_fuel_agents_order_with_the_configdrive_last():
    doc = fuel([disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART,
                                   {"type": "partition", "mount": "/srv", "size": 500,
                                    "keep_data": True}])])
    doc["hostname"] = "node-1"
    res = plan(doc)
    (placed,) = res.resolved.placed.values()
    # bios_grub 1, UEFI 2, / 3, the kept /srv 4, configdrive 5: Fuel's own numbering.
    assert [(p.number, p.part_id) for p in placed] == [
        (1, "d0-bios_grub"), (2, "d0-uefi"), (3, "d0-v1"), (4, "d0-v2"), (5, "configdrive")]
    assert placed[3].offset == (1 + 24 + 200 + 2000) * 1024 * 1024
    wipe = next(s for s in res.steps if s.kind == "wipe")
    assert wipe.args["keep"] == [4]


def test_kept_partition_behind_a_boot_member_fuel_agent_did_not_make_is_a_warning():
    layout = NailgunDriver(kept_doc(boot_on_vdb=True)).layout()
    (warning,) = [w for w in layout.warnings if "keep_data" in w]
    assert warning.startswith("ks_spaces[1] (vdb) volumes[2]: keep_data: volumes[1] (a /boot "
                              "member) comes before this partition")
    assert "lines up with a disk provision-agent made, not with one fuel-agent made" in warning
    assert native(kept_doc(boot_on_vdb=True))["disks"][1]["partitions"][3]["keep"] is True
    assert not NailgunDriver(kept_doc(boot_on_vdb=False)).layout().warnings


# --- SSH keys as Nailgun writes them ------------------------------------------------------------

KEY_A = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7fuelkeyA root@fuel.domain.tld"
KEY_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOperatorKeyB operator@example"


def nailgun_keys(**ks_meta):
    """The provision-vm sample with keys as Nailgun's serialiser writes them: "\\"%s\\"" % key."""
    doc = copy.deepcopy(sample("provision-vm"))
    doc["ks_meta"].update(ks_meta)
    return doc


def public_keys(doc):
    return list(native(doc)["configdrive"]["meta_data"]["public_keys"].values())


def test_nailgun_quoted_keys_are_unquoted_and_empty_ones_dropped():
    doc = nailgun_keys(authorized_keys=['"%s"' % KEY_A, '""', '"%s"' % KEY_B], auth_key='""')
    assert public_keys(doc) == [KEY_A, KEY_B]
    doc = nailgun_keys(authorized_keys=[], auth_key='"%s"' % KEY_A)
    assert public_keys(doc) == [KEY_A]


def test_authorized_keys_as_a_string_is_one_key_not_one_per_character():
    assert public_keys(nailgun_keys(authorized_keys='"%s"' % KEY_B, auth_key='""')) == [KEY_B]
    doc = nailgun_keys(auth_key='""')
    doc["ks_meta"]["user_accounts"][0]["ssh_keys"] = KEY_A
    cloud = json.loads(native(doc)["configdrive"]["user_data"].split("\n", 1)[1])
    assert cloud["users"][1]["ssh_authorized_keys"] == [KEY_A]


@pytest.mark.parametrize("value, where", [
    ("ssh-rsa " + "A" * 10_000_000, "ks_meta.authorized_keys"),
    (["ssh-rsa " + "A" * 20_000], "ks_meta.authorized_keys[0]"),
    ([KEY_A] * 100_000, "ks_meta.authorized_keys"),
    (["ssh-rsa " + "A" * 10_000] * 30, "ks_meta.authorized_keys"),
    ({"k": KEY_A}, "ks_meta.authorized_keys"),
])
def test_oversized_or_malformed_key_lists_are_refused_with_exit_2(tmp_path, value, where):
    doc = nailgun_keys(authorized_keys=value)
    out = problems(doc)
    assert len(out) == 1 and out[0].startswith(where + ": "), out
    assert "AAAA" not in out[0]          # the value is not echoed back
    rc, stdout, err = run_cli(tmp_path, doc, extra=["--data_driver", "nailgun"])
    assert rc == 2 and stdout == "" and where in err


# --- what fuel-agent refused, and Fuel's locations ----------------------------------------

def test_a_document_without_image_data_is_refused(tmp_path):
    spaces = [disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART])]
    doc = fuel(spaces)
    del doc["ks_meta"]["image_data"]
    assert problems(doc) == ["ks_meta.image_data: missing: without it no OS is installed; "
                             "Fuel's image_data maps \"/\" to the root filesystem image"]
    doc["ks_meta"]["image_uri"] = "http://10.20.0.2:8080/centos/x86_64"    # pre-2014 documents
    assert "(the pre-2014 image_uri is not supported)" in problems(doc)[0]
    rc, _, err = run_cli(tmp_path, doc, extra=["--data_driver", "nailgun"])
    assert rc == 2 and "ks_meta.image_data" in err
    no_root = fuel(spaces, image_data={"/srv": dict(ROOT_IMAGE)})
    assert "ks_meta.image_data: has no image for \"/\" (fuel-agent required one)" in \
        problems(no_root)


def test_a_root_over_16_tib_is_refused_like_fuel_agent():
    big = 16 * 1024 * 1024 + 1
    out = problems(fuel([disk("sda", big + 400, [{"type": "boot", "size": 300},
                                                  dict(ROOT_PART, size=big)])]))
    assert out == [f"ks_spaces[0] (sda) volumes[1]: root filesystem of {big} MiB: must be less "
                   "than 16 TiB (as fuel-agent required)"]
    lv = fuel([disk("sda", big + 400, [{"type": "boot", "size": 300},
                                       {"type": "pv", "vg": "os", "size": big + 100}]),
               {"type": "vg", "id": "os", "volumes": [
                   {"type": "lv", "name": "root", "mount": "/", "file_system": "ext4",
                    "size": big}]}])
    assert [p.split(":")[0] for p in problems(lv)] == ["ks_spaces[1] (os) volumes[0]"]


def test_an_integer_disk_id_is_refused():
    space = disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART])
    space["id"] = 3
    assert problems(fuel([space])) == [
        "ks_spaces[0] (vda): id must be a string (a kernel name or a disk/by-path, disk/by-id "
        "link)"]


def test_negative_sizes_nailgun_wrote_are_warnings_in_the_plan(tmp_path):
    doc = fuel([disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART,
                                   {"type": "pv", "vg": "image", "size": -64}]),
                {"type": "vg", "id": "os", "volumes": [
                    {"type": "lv", "name": "log", "mount": "/var/log", "size": -1200}]}])
    rc, out, err = run_cli(tmp_path, doc, extra=["--data_driver", "nailgun", "--plan_format",
                                                 "json"])
    assert rc == 0, err
    assert json.loads(out)["warnings"] == [
        "ks_spaces[0] (vda) volumes[2]: negative size -64 MiB (Nailgun could not fit this "
        "volume): not created",
        "ks_spaces[1] (os) volumes[0]: negative size -1200 MiB (Nailgun could not fit this "
        "volume): not created"]


def test_a_bad_partition_guid_names_fuels_location(tmp_path):
    doc = fuel([disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART,
                                   {"type": "partition", "name": "cephjournal", "mount": "none",
                                    "size": 100, "partition_guid": "not-a-guid"}])])
    assert problems(doc) == ["ks_spaces[0] (vda) volumes[2]: partition_guid must be a GPT type "
                             "GUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)"]
    rc, _, err = run_cli(tmp_path, doc, extra=["--data_driver", "nailgun"])
    assert rc == 2 and "ks_spaces[0] (vda) volumes[2]" in err and "$.disks" not in err


# --- Ceph journals, swift-storage, CentOS 6 ----------------------------------------------

JOURNAL_GUID = "45b0969e-9b03-4f30-b4c6-b4b80ceff106"
OSD_GUID = "4fbd7e29-9d25-41b8-afd0-062c0ceff05d"


def _journal(size):
    return {"type": "partition", "name": "cephjournal", "mount": "none", "file_system": "none",
            "partition_guid": JOURNAL_GUID, "size": size}


def _osd_disk(name):
    return disk(name, 4096, [{"type": "boot", "size": 300},
                             {"type": "partition", "name": "ceph", "mount": "none",
                              "file_system": "none", "partition_guid": OSD_GUID,
                              "size": 3333}])


def _journals(doc):
    return [[(p["size"], p["type_guid"]) for p in d["partitions"] if "-j" in p["id"]]
            for d in doc["disks"]]


def test_ceph_journals_are_split_per_osd_as_fuel_agent_did():
    """fuel-agent: 5 OSDs over 2 journal devices → 3 partitions on the first, 2 on the second,
    each the volume's size / ceil(5 / 2); the OSD partitions get no file system."""
    spaces = [disk("sda", 40000, [{"type": "boot", "size": 300}, ROOT_PART, _journal(30000)]),
              disk("sdb", 31000, [{"type": "boot", "size": 300}, _journal(30000)])]
    spaces += [_osd_disk(f"sd{c}") for c in "cdefg"]
    doc = native(fuel(spaces))
    assert _journals(doc)[:2] == [[(10000, JOURNAL_GUID)] * 3, [(10000, JOURNAL_GUID)] * 2]
    osd_parts = {p["id"] for d in doc["disks"][2:] for p in d["partitions"]
                 if p.get("type_guid") == OSD_GUID}
    assert len(osd_parts) == 5
    assert not osd_parts & {fs["device"] for fs in doc["filesystems"]}


def test_a_ceph_journal_partition_is_at_most_10240_mib():
    spaces = [disk("sda", 40000, [{"type": "boot", "size": 300}, ROOT_PART, _journal(30000)]),
              _osd_disk("sdb"), _osd_disk("sdc")]
    assert _journals(native(fuel(spaces)))[0] == [(10240, JOURNAL_GUID)] * 2


def test_swift_storage_gets_the_unmounted_xfs_fuel_agent_made():
    swift = {"type": "partition", "name": "swift-storage", "mount": "none",
             "file_system": "xfs", "partition_guid": "deadbeef-9d34-4175-8ded-1ce68967a5ee",
             "size": 500}
    doc = native(fuel([disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART, swift])]))
    part = doc["disks"][0]["partitions"][3]
    fs = next(f for f in doc["filesystems"] if f["device"] == part["id"])
    assert fs["type"] == "xfs" and "mount" not in fs


@pytest.mark.parametrize("profile,refused", [("centos-x86_64", True), ("centos", True),
                                             ("centos7-x86_64", False),
                                             ("ubuntu_1604_x86_64", False)])
def test_a_centos_6_profile_is_refused_for_its_grub1(profile, refused):
    doc = dict(fuel([disk("vda", 4096, [{"type": "boot", "size": 300}, ROOT_PART])]),
               profile=profile)
    if refused:
        assert problems(doc) == [f"profile: {profile!r} is CentOS 6, which fuel-agent "
                                 "installed with grub1 and md metadata 0.90; provision installs "
                                 "grub2 only: not supported"]
    else:
        assert native(doc)["disks"]
