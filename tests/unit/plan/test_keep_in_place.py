"""What curtin's storage tests say about existing disks, in this format (issue 54): a kept
partition's contents given up while its place stays (`wipe`), a new filesystem or a new volume
group there, a kept md array assembled and used, partitions placed by number and offset (an
msdos table with its extended and logical partitions written out). Plans are read back as
JSON: which steps touch which device. Every combination that cannot be carried out is refused
before anything is written, at the entry that causes it."""

import json

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError, MachineMismatch
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline, render
from tests.unit.helpers import inventory

DISKS = inv_mod.from_document(inventory("three-disks"))        # vda, vdb, vdc: 4 GiB each
MiB = 1 << 20
TAR = {"uri": "http://h/root.tar.gz", "format": "tar", "target": "/",
       "checksum": "sha256:" + "a" * 64}


def planned(doc):
    return pipeline.build_plan(NativeDriver(doc).layout(), DISKS)


def steps_of(doc):
    return json.loads(render.plan_json(planned(doc)))["steps"]


def on(steps, device):
    return [s["kind"] for s in steps if device in (s["args"].get("device"),
                                                   s["args"].get("disk"))]


def refused(doc):
    with pytest.raises((InputError, MachineMismatch)) as exc:
        planned(doc)
    return [str(p) for p in exc.value.problems]


def doc_with(parts, **more):
    doc = {"version": 1, "disks": [{"id": "d", "match": {"name": "vda"}, "partitions": parts}],
           "filesystems": [], "images": [TAR]}
    doc.update(more)
    return doc


ROOT = {"id": "root", "size": "1GiB"}
ROOT_FS = {"device": "root", "type": "ext4", "mount": "/"}


# (a) and (b): keep the place, not the contents

def test_a_kept_partition_wiped_gets_a_new_filesystem_and_keeps_its_place():
    """curtin's reuse-raid-member-wipe-partition: preserve, wipe superblock, a new format."""
    doc = doc_with([ROOT, {"id": "srv", "size": "1GiB", "keep": True, "wipe": "superblock"}],
                   filesystems=[ROOT_FS, {"device": "srv", "type": "xfs", "mount": "/srv"}])
    steps = steps_of(doc)
    assert on(steps, "/dev/vda2") == ["partition", "wipe_contents", "mkfs", "mount"]
    part = next(s for s in steps if s["kind"] == "partition" and s["args"]["number"] == 2)
    assert part["args"]["keep"] is True and "in place" in part["description"]
    kinds = [s["kind"] for s in steps]
    wipe = steps[kinds.index("wipe_contents")]
    assert wipe["args"] == {"device": "/dev/vda2", "how": "superblock"}
    assert kinds.index("settle") < kinds.index("wipe_contents") < kinds.index("mkfs")
    # the disk's wipe spares it like any kept partition: its bytes go only through the step
    assert next(s for s in steps if s["kind"] == "wipe")["args"]["keep"] == [2]
    mount = next(s for s in steps if s["kind"] == "mount" and s["args"]["mount_point"] == "/srv")
    assert "kept" not in mount["description"]
    text = render.plan_text(planned(doc))
    assert "/dev/vda2      1GiB  linux  kept in place, contents wiped (superblock)" in text


def test_a_kept_partition_zeroed_is_left_empty_and_a_new_one_zeroed_too():
    doc = doc_with([ROOT, {"id": "old", "size": "512MiB", "keep": True, "wipe": "zero"},
                    {"id": "new", "size": "512MiB", "wipe": "zero"},
                    {"id": "plain", "size": "512MiB", "wipe": "superblock"}],
                   filesystems=[ROOT_FS])
    steps = steps_of(doc)
    assert on(steps, "/dev/vda2") == ["partition", "wipe_contents"]
    assert on(steps, "/dev/vda3") == ["partition", "wipe_contents"]
    # a new partition is cleared of signatures when it settles: no step of its own
    assert on(steps, "/dev/vda4") == ["partition"]
    wipes = {s["args"]["device"]: s["args"]["how"] for s in steps if s["kind"] == "wipe_contents"}
    assert wipes == {"/dev/vda2": "zero", "/dev/vda3": "zero"}


def test_a_kept_partition_without_wipe_still_keeps_its_filesystem():
    doc = doc_with([ROOT, {"id": "srv", "size": "1GiB", "keep": True}],
                   filesystems=[ROOT_FS, {"device": "srv", "type": "xfs", "mount": "/srv"}])
    assert on(steps_of(doc), "/dev/vda2") == ["partition", "mount"]


# (e) a new volume group on a kept partition

def test_a_new_volume_group_on_a_kept_partition_once_it_is_wiped():
    """curtin's preserve-partition-wipe-vg: a kept partition, zeroed, becomes a PV."""
    doc = doc_with([ROOT, {"id": "pv", "size": "remaining", "type": "lvm", "keep": True,
                           "wipe": "zero"}],
                   filesystems=[ROOT_FS, {"device": "lv", "type": "ext4", "mount": "/home"}],
                   volume_groups=[{"id": "vg", "name": "vg1", "pvs": ["pv"],
                                   "logical_volumes": [{"id": "lv", "name": "lv0",
                                                        "size": "1GiB"}]}])
    steps = steps_of(doc)
    assert on(steps, "/dev/vda2") == ["partition", "wipe_contents", "pv_create"]
    kinds = [s["kind"] for s in steps]
    assert kinds.index("wipe_contents") < kinds.index("pv_create") < kinds.index("vg_create")


def test_a_kept_partition_with_its_contents_is_refused_as_a_new_pv_array_member_or_luks():
    doc = doc_with([ROOT, {"id": "a", "size": "512MiB", "keep": True},
                    {"id": "b", "size": "512MiB", "keep": True},
                    {"id": "c", "size": "512MiB", "keep": True}],
                   filesystems=[ROOT_FS],
                   volume_groups=[{"id": "vg", "pvs": ["a"]}],
                   raids=[{"id": "md", "level": 1, "members": ["b", "root"]}],
                   encrypted=[{"id": "cr", "device": "c", "unlock": {"tpm2": {}}}],
                   recovery={"age_recipients": ["age1" + "q" * 58]})
    found = refused(doc)
    assert any(p.startswith("$.volume_groups[0]: 'a' is kept with its contents, so it cannot "
                            "become a physical volume of a new volume group") for p in found)
    assert any(p.startswith("$.raids[0]: partition 'b' is kept with its contents, so it cannot "
                            "become a member of a new array") for p in found), found
    assert any(p.startswith("$.encrypted[0]: 'c' is kept with its contents, so it cannot be "
                            "encrypted") for p in found), found


def test_a_wiped_kept_partition_may_become_a_member_of_a_new_array_or_an_image_target():
    doc = doc_with([{"id": "a", "size": "1GiB", "type": "raid", "keep": True,
                     "wipe": "superblock"}],
                   filesystems=[{"device": "md", "type": "ext4", "mount": "/"}],
                   raids=[{"id": "md", "level": 1, "members": ["a", "b"]}],
                   images=[{"uri": "http://h/root.img", "format": "raw", "target": "md",
                            "checksum": "sha256:" + "a" * 64}])
    doc["disks"].append({"id": "e", "match": {"name": "vdb"}, "partitions": [
        {"id": "b", "size": "1GiB", "type": "raid"}]})
    steps = steps_of(doc)
    kinds = [s["kind"] for s in steps]
    assert kinds.index("wipe_contents") < kinds.index("md_create")


# (c) kept md arrays

def two_member_array(keep=True, wipe=None, member_keep=True):
    doc = doc_with([ROOT, {"id": "m0", "size": "1GiB", "type": "raid", "keep": member_keep}],
                   filesystems=[ROOT_FS, {"device": "md", "type": "ext4", "mount": "/srv"}],
                   raids=[{"id": "md", "name": "md1", "level": 1, "members": ["m0", "m1"],
                           "keep": keep, **({"wipe": wipe} if wipe else {})}])
    doc["disks"].append({"id": "e", "match": {"name": "vdb"}, "partitions": [
        {"id": "m1", "size": "1GiB", "type": "raid", "keep": True}]})
    return doc


def test_a_kept_array_is_assembled_and_its_filesystem_mounted_as_it_is():
    """curtin's preserve-raid: the array and its filesystem kept, mounted at /srv."""
    doc = two_member_array()
    steps = steps_of(doc)
    assert on(steps, "/dev/md/md1") == ["md_assemble", "mount"]
    assemble = next(s for s in steps if s["kind"] == "md_assemble")
    assert assemble["args"] == {"device": "/dev/md/md1", "name": "md1", "level": 1,
                                "members": ["/dev/vda2", "/dev/vdb1"], "spares": [],
                                "on_member_failure": "fail"}
    assert "md_create" not in [s["kind"] for s in steps]
    mount = next(s for s in steps if s["kind"] == "mount" and s["args"]["mount_point"] == "/srv")
    assert "kept" in mount["description"]
    assert any(s["kind"] == "mdadm_conf" for s in steps)
    assert "/dev/md/md1  RAID1" in render.plan_text(planned(doc))
    assert "kept: assembled as it is" in render.plan_text(planned(doc))


def test_a_kept_array_wiped_gets_a_new_filesystem():
    steps = steps_of(two_member_array(wipe="superblock"))
    assert on(steps, "/dev/md/md1") == ["md_assemble", "wipe_contents", "mkfs", "mount"]


def test_a_kept_array_as_the_pv_of_a_kept_volume_group():
    doc = two_member_array()
    doc["filesystems"][1]["device"] = "lv"
    doc["volume_groups"] = [{"id": "vg", "name": "data", "pvs": ["md"], "keep": True,
                             "logical_volumes": [{"id": "lv", "name": "srv", "size": "512MiB"}]}]
    steps = steps_of(doc)
    kinds = [s["kind"] for s in steps]
    assert kinds.index("md_assemble") < kinds.index("vg_activate")
    assert steps[kinds.index("vg_activate")]["args"]["pvs"] == ["/dev/md/md1"]
    assert not {"md_create", "pv_create", "vg_create"} & set(kinds)
    assert on(steps, "/dev/data/srv") == ["mount"]


def test_a_kept_array_over_a_member_that_is_not_kept_is_refused():
    found = refused(two_member_array(member_keep=False))
    assert found == ["$.raids[0]: the array is kept, so its member 'm0' must be a kept "
                     "partition (keep: true, no wipe) or a whole disk with wipe: false; "
                     "anything else is wiped or re-created before the array is assembled"]


def test_a_kept_array_on_whole_disks_needs_them_unwiped():
    doc = {"version": 1,
           "disks": [{"id": "a", "match": {"name": "vda"}, "partitions": [ROOT]},
                     {"id": "b", "match": {"name": "vdb"}, "wipe": False},
                     {"id": "c", "match": {"name": "vdc"}}],
           "raids": [{"id": "md", "level": 1, "members": ["b", "c"], "keep": True}],
           "filesystems": [ROOT_FS, {"device": "md", "type": "ext4", "mount": "/srv"}],
           "images": [TAR]}
    assert [p for p in refused(doc) if "'b'" in p] == []
    assert any("its member 'c' must be" in p for p in refused(doc))
    doc["disks"][2]["wipe"] = False
    steps = steps_of(doc)
    assert on(steps, "/dev/vdb") == [] and on(steps, "/dev/vdc") == []
    assert [s["args"]["members"] for s in steps if s["kind"] == "md_assemble"] == \
        [["/dev/vdb", "/dev/vdc"]]


def test_an_image_onto_a_kept_array_is_refused():
    doc = two_member_array()
    doc["images"] = [{"uri": "http://h/x.img", "target": "md", "checksum": "md5:" + "a" * 32}]
    doc["filesystems"] = [{"device": "root", "type": "ext4", "mount": "/"}]
    assert "$.images[0]: 'md' is kept with its contents, so no image can be written to it " \
           "(give it wipe to use its place anew)" in refused(doc)


# (d) partitions by number and offset

def test_gpt_partitions_at_given_offsets_and_numbers_are_planned_exactly():
    """curtin's preserve and uefi_reuse_esp: an existing table described byte for byte, a
    number left out (1, 2, then 10)."""
    doc = doc_with([{"id": "esp", "number": 1, "offset": "2MiB", "size": "512MiB",
                     "type": "esp", "keep": True},
                    {"id": "root", "number": 2, "offset": "1GiB", "size": "1GiB"},
                    {"id": "srv", "number": 10, "offset": 2200, "size": "1000000000B",
                     "keep": True}],
                   filesystems=[ROOT_FS, {"device": "esp", "type": "vfat", "mount": "/boot/efi"},
                                {"device": "srv", "type": "ext4", "mount": "/srv"}])
    steps = steps_of(doc)
    parts = [(s["args"]["number"], s["args"]["offset"], s["args"]["size"], s["args"]["keep"])
             for s in steps if s["kind"] == "partition"]
    assert parts == [(1, 2 * MiB, 512 * MiB, True), (2, 1024 * MiB, 1024 * MiB, False),
                     (10, 2200 * MiB, 1000000000, True)]
    assert on(steps, "/dev/vda10") == ["partition", "mount"]


def test_numbers_default_to_one_more_than_the_partition_before():
    doc = doc_with([{"id": "a", "size": "1MiB", "type": "bios_grub", "number": 3},
                    {"id": "root", "size": "remaining"}], filesystems=[ROOT_FS])
    parts = [(s["args"]["number"], s["args"]["offset"]) for s in steps_of(doc)
             if s["kind"] == "partition"]
    assert parts == [(3, MiB), (4, 2 * MiB)]


def msdos_logicals(**extended):
    """curtin's reuse-msdos-partitions, scaled to a 4 GiB disk: a primary, an extended
    partition and two logical ones, all kept at the places they have."""
    return {"version": 1,
            "disks": [{"id": "d", "match": {"name": "vda"}, "table": "msdos", "partitions": [
                {"id": "p1", "number": 1, "offset": "1MiB", "size": "1024MiB", "flags": ["boot"],
                 "keep": True, "wipe": "superblock"},
                {"id": "ext", "number": 2, "type": "extended", "offset": "1026MiB",
                 "size": "2047MiB", "keep": True, **extended},
                {"id": "p5", "number": 5, "offset": "1027MiB", "size": "1023MiB", "keep": True,
                 "wipe": "superblock"},
                {"id": "p6", "number": 6, "offset": "2051MiB", "size": "1022MiB", "keep": True,
                 "wipe": "superblock"}]}],
            "filesystems": [{"device": "p1", "type": "ext4", "mount": "/"}],
            "images": [TAR]}


def test_msdos_extended_and_logical_partitions_written_out_are_planned_as_written():
    steps = steps_of(msdos_logicals())
    parts = [(s["args"]["number"], s["args"]["kind"], s["args"]["offset"] // MiB,
              s["args"]["size"] // MiB, s["args"]["type"]) for s in steps
             if s["kind"] == "partition"]
    assert parts == [(1, "primary", 1, 1024, "0x83"), (2, "extended", 1026, 2047, "0x0f"),
                     (5, "logical", 1027, 1023, "0x83"), (6, "logical", 2051, 1022, "0x83")]
    wipes = [s["args"]["device"] for s in steps if s["kind"] == "wipe_contents"]
    assert wipes == ["/dev/vda1", "/dev/vda5", "/dev/vda6"]
    assert on(steps, "/dev/vda1") == ["partition", "wipe_contents", "mkfs", "mount"]


def test_new_logical_partitions_without_offsets_follow_each_other_inside_the_extended():
    doc = {"version": 1,
           "disks": [{"id": "d", "match": {"name": "vda"}, "table": "msdos", "partitions": [
               {"id": "root", "size": "1GiB"},
               {"id": "ext", "type": "extended", "size": "remaining"},
               {"id": "l1", "size": "512MiB"}, {"id": "l2", "size": "remaining"}]}],
           "filesystems": [ROOT_FS], "images": [TAR]}
    parts = [(s["args"]["number"], s["args"]["kind"], s["args"]["offset"] // MiB)
             for s in steps_of(doc) if s["kind"] == "partition"]
    assert parts == [(1, "primary", 1), (2, "extended", 1025), (5, "logical", 1026),
                     (6, "logical", 1539)]


@pytest.mark.parametrize("change, expected", [
    # a logical partition outside its extended one
    (lambda d: d["disks"][0]["partitions"][3].update(offset="3100MiB"),
     "$.disks[0].partitions[3]: this logical partition at bytes 3250585600-4322230271 must lie "
     "inside its extended partition"),
    # two partitions overlapping
    (lambda d: d["disks"][0]["partitions"][1].update(offset="1000MiB"),
     "$.disks[0].partitions[1]: starts at byte 1048576000, inside the partition before it"),
    # the same number twice
    (lambda d: d["disks"][0]["partitions"][3].update(number=5),
     "$.disks[0].partitions[3]: number 5 is also given to $.disks[0].partitions[2]"),
    # logical partitions kept, the extended one holding them not
    (lambda d: d["disks"][0]["partitions"][1].update(keep=False),
     "$.disks[0].partitions[2]: this logical partition is kept, so the extended partition "
     "'ext' that holds it must be kept too"),
    # a filesystem on the extended partition
    (lambda d: d["filesystems"].append({"device": "ext", "type": "ext4", "mount": "/x"}),
     "$.filesystems[1]: 'ext' is an extended partition: it holds the logical partitions"),
    # an extended partition on gpt
    (lambda d: d["disks"][0].update(table="gpt"),
     "$.disks[0].partitions[1]: an extended partition exists only in msdos tables"),
    # an offset that is a share
    (lambda d: d["disks"][0]["partitions"][0].update(offset="10%"),
     "$.disks[0].partitions[0]: offset is where the partition starts: give bytes"),
    # remaining before the end
    (lambda d: d["disks"][0]["partitions"][0].update(size="remaining"),
     "$.disks[0].partitions[0]: with partitions placed by number or offset, \"remaining\" is "
     "for the last partition (and the last logical one"),
])
def test_explicit_placements_that_cannot_be_are_refused_at_their_entry(change, expected):
    doc = msdos_logicals()
    change(doc)
    found = refused(doc)
    assert any(p.startswith(expected) for p in found), found


def test_a_logical_number_without_an_extended_partition_is_refused():
    doc = doc_with([{"id": "root", "number": 5, "size": "1GiB"}], filesystems=[ROOT_FS])
    doc["disks"][0]["table"] = "msdos"
    assert any(p.startswith("$.disks[0].partitions[0]: number 5: msdos numbers 5 and up are "
                            "logical partitions") for p in refused(doc))


def test_keep_if_present_with_explicit_places_is_refused():
    doc = doc_with([{"id": "root", "number": 1, "size": "1GiB"},
                    {"id": "eph", "number": 2, "size": "1GiB", "keep": "if_present"}],
                   filesystems=[ROOT_FS])
    assert any(p.startswith("$.disks[0].partitions[1]: keep \"if_present\" keeps the partition "
                            "where the disk's table has it") for p in refused(doc))


def test_wipe_on_an_extended_partition_is_refused():
    found = refused(msdos_logicals(wipe="zero"))
    assert any(p.startswith("$.disks[0].partitions[1]: an extended partition holds the logical "
                            "partitions, no contents of its own to wipe") for p in found)


def test_the_msdos_example_of_the_docs_plans_as_it_says():
    """docs/native-format.md: curtin's reuse-msdos-partitions, on the 10 GiB disk it needs."""
    doc = msdos_logicals()
    parts = doc["disks"][0]["partitions"]
    for part, (offset, size) in zip(parts, [("1MiB", "3072MiB"), ("3074MiB", "5119MiB"),
                                            ("3075MiB", "2047MiB"), ("5123MiB", "3069MiB")]):
        part.update(offset=offset, size=size)
    disk = inv_mod.normalize({"name": "/dev/vda", "size": 10 << 30})
    steps = json.loads(render.plan_json(pipeline.build_plan(NativeDriver(doc).layout(),
                                                            [disk])))["steps"]
    assert [(s["args"]["number"], s["args"]["offset"] // MiB, s["args"]["size"] // MiB)
            for s in steps if s["kind"] == "partition"] == [(1, 1, 3072), (2, 3074, 5119),
                                                            (5, 3075, 2047), (6, 5123, 3069)]
    assert on(steps, "/dev/vda1") == ["partition", "wipe_contents", "mkfs", "mount"]
    assert on(steps, "/dev/vda5") == ["partition", "wipe_contents"]


# (c) a partition table on an md array

def partitioned_array(keep=False, wipe=None, parts=None):
    doc = two_member_array(keep=keep, wipe=wipe, member_keep=keep)
    doc["disks"][1]["partitions"][0]["keep"] = keep
    doc["raids"][0]["partitions"] = parts or [{"id": "md-a", "size": "256MiB"},
                                              {"id": "md-b", "size": "remaining"}]
    doc["filesystems"][1]["device"] = "md-a"
    doc["filesystems"].append({"device": "md-b", "type": "xfs", "mount": "/var"})
    return doc


def test_a_new_array_gets_its_partition_table_after_it_is_made():
    steps = steps_of(partitioned_array())
    kinds = [s["kind"] for s in steps]
    assert on(steps, "/dev/md/md1")[:2] == ["md_create", "partition_table"]
    assert on(steps, "/dev/md/md1a") == [] and on(steps, "/dev/md/md1p1") == [
        "partition", "mkfs", "mount"]
    first, settle = [s["args"] for s in steps if s["kind"] == "settle"]
    # the disks' partitions are waited for before the array is made, its own after
    assert first["devices"] == ["/dev/vda1", "/dev/vda2", "/dev/vdb1"]
    assert settle == {"disks": ["/dev/md/md1"], "devices": ["/dev/md/md1p1", "/dev/md/md1p2"]}
    assert kinds.index("md_create") < kinds.index("mkfs")


def test_a_kept_array_keeps_its_table_and_the_kept_partition_in_it():
    doc = partitioned_array(keep=True, parts=[{"id": "md-a", "size": "256MiB", "keep": True},
                                              {"id": "md-b", "size": "remaining"}])
    steps = steps_of(doc)
    assert on(steps, "/dev/md/md1p1") == ["partition", "mount"]
    assert on(steps, "/dev/md/md1p2") == ["partition", "mkfs", "mount"]
    table = next(s for s in steps if s["kind"] == "partition_table"
                 and s["args"]["disk"] == "/dev/md/md1")
    assert "partitions [1] kept where they are" in table["description"]
    kinds = [s["kind"] for s in steps]
    assert kinds.index("md_assemble") < steps.index(table)
    assert "md_create" not in kinds


def test_a_kept_array_wiped_gets_a_new_table():
    """curtin's partition-existing-raid: the array preserved, wiped, a new gpt on it."""
    steps = steps_of(partitioned_array(keep=True, wipe="superblock"))
    assert on(steps, "/dev/md/md1") == ["md_assemble", "wipe_contents", "partition_table",
                                        "partition", "partition"]


@pytest.mark.parametrize("change, expected", [
    (lambda d: d["raids"][0]["partitions"][0].update(keep=True),
     "$.raids[0].partitions[0]: a partition of array 'md' is kept, so the array must be kept"),
    (lambda d: d["raids"][0]["partitions"][0].update(type="esp"),
     "$.raids[0].partitions[0]: a esp partition on an md array: firmware reads"),
    (lambda d: d["filesystems"].append({"device": "md", "type": "ext4", "mount": "/x"}),
     "$.filesystems[3]: device 'md' is not a usable device here (array with partitions)"),
])
def test_partitions_on_arrays_that_cannot_be_are_refused(change, expected):
    doc = partitioned_array()
    change(doc)
    assert any(p.startswith(expected) for p in refused(doc)), refused(doc)


def test_remaining_leaves_room_for_the_configdrive_partition_a_layout_implies():
    doc = doc_with([{"id": "esp", "number": 1, "offset": "1MiB", "size": "512MiB",
                     "type": "esp"}, {"id": "root", "size": "remaining"}],
                   filesystems=[ROOT_FS], configdrive={"meta_data": {"uuid": "x"}})
    parts = [(s["args"]["number"], s["args"]["offset"] // MiB, s["args"]["size"] // MiB)
             for s in steps_of(doc) if s["kind"] == "partition"]
    # 4 GiB less GPT's backup: the last MiB is not usable; 64 MiB for the configdrive
    assert parts == [(1, 1, 512), (2, 513, 4095 - 513 - 64 - 1), (3, 4095 - 65, 64)]


def test_luks_on_a_kept_partition_is_refused_before_anything_is_written():
    """A defect found on the way: encryption on a kept partition was planned (luks_format on
    the kept device, its contents overwritten by the LUKS header)."""
    doc = doc_with([ROOT, {"id": "c", "size": "512MiB", "keep": True}], filesystems=[ROOT_FS],
                   encrypted=[{"id": "cr", "device": "c", "unlock": {"tpm2": {}}}],
                   recovery={"age_recipients": ["age1" + "q" * 58]})
    with pytest.raises(InputError) as exc:
        planned(doc)
    assert [str(p) for p in exc.value.problems] == [
        "$.encrypted[0]: 'c' is kept with its contents, so it cannot be encrypted (the LUKS "
        "header would overwrite them)"]
