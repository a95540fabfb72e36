"""instance_info/preserve_ephemeral (Nova's rebuild --preserve-ephemeral), as ironic-python-agent
honours it: the ephemeral partition is kept where the disk's table has it and nothing writes to
it; a disk without it gets it created; one whose partition does not match is refused before
anything is written. The plans are read back as JSON: which steps touch which device."""

import json

import pytest

from provision_agent.data_drivers.ironic import IronicDriver
from provision_agent.errors import InputError, MachineMismatch
from provision_agent.plan import inventory, pipeline, render

SHA = "a" * 64
GIB_SECTORS = (1 << 30) // 512


def node(boot_mode="bios", layout=None, **info):
    base = {"image_source": "http://h/img.raw", "image_os_hash_algo": "sha256",
            "image_os_hash_value": SHA, "image_disk_format": "raw", "kernel": "http://h/k",
            "ramdisk": "http://h/r", "root_gb": 2, "ephemeral_gb": 1,
            "preserve_ephemeral": True}
    base.update(info)
    doc = {"node_uuid": "u", "instance_info": {k: v for k, v in base.items() if v is not None},
           "properties": {"root_device": {"serial": "s1"}}, "boot_mode": boot_mode}
    if layout is not None:
        doc["layout"] = layout
    return doc


def table(*parts, label="dos"):
    """An sfdisk --json partition table: (number, start sector, sectors)."""
    return {"label": label, "sectorsize": 512,
            "partitions": [{"node": f"/dev/vda{n}", "start": s, "size": z, "type": "83"}
                           for n, s, z in parts]}


# what a previous deploy left (BIOS, msdos): ephemeral0 at 1 MiB, 1 GiB; root behind it
PREVIOUS = table((1, 2048, GIB_SECTORS), (2, 2048 + GIB_SECTORS, 2 * GIB_SECTORS))


def planned(doc, partition_table="absent"):
    disk = {"name": "/dev/vda", "size": 10 << 30, "serial": "s1"}
    if partition_table != "absent":
        disk["partition_table"] = partition_table
    return pipeline.build_plan(IronicDriver(doc).layout(),
                               inventory.from_document({"disks": [disk]}))


def plan_json(doc, partition_table="absent"):
    p = planned(doc, partition_table)
    return p, json.loads(render.plan_json(p))


def steps_on(plan, device):
    """The kinds of the steps that name device (as disk, device or member), but settle (it
    only waits for the device to appear)."""
    out = []
    for s in (s for s in plan["steps"] if s["kind"] != "settle"):
        values = [v for k, v in s["args"].items() if k in ("device", "disk", "devices")]
        if device in values or any(isinstance(v, list) and device in v for v in values):
            out.append(s["kind"])
    return out


def of_kind(plan, kind):
    return [s["args"] for s in plan["steps"] if s["kind"] == kind]


def wipe_keeps(plan):
    (wipe,) = of_kind(plan, "wipe")
    return wipe["keep"]


def partition(plan, number):
    return next(a for a in of_kind(plan, "partition") if a["number"] == number)


def test_a_rebuild_keeps_the_ephemeral_partition_the_disk_holds():
    _, plan = plan_json(node(), PREVIOUS)
    assert wipe_keeps(plan) == [1]
    part1 = partition(plan, 1)
    assert part1["keep"] is True
    assert (part1["offset"], part1["size"]) == (1 << 20, 1 << 30)
    # nothing but its (skipped) partition step names it: no mkfs, no image, no mount
    assert steps_on(plan, "/dev/vda1") == ["partition"]
    assert not of_kind(plan, "mkfs")
    # the rest is rebuilt: the image goes to the new root
    assert [a["device"] for a in of_kind(plan, "write_image")] == ["/dev/vda2"]
    assert next(p for p in plan["layout"]["disks"][0]["partitions"]
                if p["number"] == 1)["keep"] is True


def test_the_place_is_read_from_the_disk_not_recomputed():
    # made by another tool 2 MiB in, not at the 1 MiB this layout would place it
    found = table((1, 4096, GIB_SECTORS), (2, 4096 + GIB_SECTORS, 4 * GIB_SECTORS))
    _, plan = plan_json(node(), found)
    part1 = partition(plan, 1)
    assert (part1["offset"], part1["size"], part1["keep"]) == (2 << 20, 1 << 30, True)
    root = partition(plan, 2)
    assert root["offset"] == (2 << 20) + (1 << 30) and not root["keep"]


def test_uefi_the_ephemeral_partition_is_the_one_after_the_esp():
    found = table((1, 2048, 200 * 2048), (2, 2048 + 200 * 2048, GIB_SECTORS), label="gpt")
    _, plan = plan_json(node(boot_mode="uefi"), found)
    assert wipe_keeps(plan) == [2]
    assert steps_on(plan, "/dev/vda2") == ["partition"]
    assert [a["device"] for a in of_kind(plan, "mkfs")] == ["/dev/vda1"]


@pytest.mark.parametrize("found", [None, table((2, 2048, GIB_SECTORS))],
                         ids=["no-table", "no-such-partition"])
def test_a_first_deploy_creates_it(found):
    p, plan = plan_json(node(), found)
    assert wipe_keeps(plan) == []
    assert "mkfs" in steps_on(plan, "/dev/vda1")
    assert any("a first deploy" in w and "partition 1 is created" in w for w in plan["warnings"])


def test_a_partition_that_is_not_the_ephemeral_one_is_refused_before_anything_is_written():
    found = table((1, 2048, 2 * GIB_SECTORS))
    with pytest.raises(MachineMismatch) as exc:
        planned(node(), found)
    text = str(exc.value)
    assert "partition 1 of /dev/vda, to be kept, is 2GiB at bytes 1048576-" in text
    assert "the request is 1GiB" in text and "preserve_ephemeral" in text


def test_a_kept_partition_leaving_no_room_behind_it_is_refused():
    # found 8 GiB into the 10 GiB disk: the 2 GiB root no longer fits behind it
    found = table((1, 8 * GIB_SECTORS, GIB_SECTORS))
    with pytest.raises(MachineMismatch) as exc:
        planned(node(), found)
    assert "behind it the layout's other partitions need 1GiB more than /dev/vda has" \
        in str(exc.value)


def test_a_kept_partition_where_the_layout_puts_an_earlier_one_is_refused():
    # UEFI: the ESP takes the first 200 MiB; a partition 2 found 100 MiB in overlaps it
    found = table((2, 100 * 2048, GIB_SECTORS), label="gpt")
    with pytest.raises(MachineMismatch) as exc:
        planned(node(boot_mode="uefi"), found)
    assert "where the layout puts partition 1 (efi-part" in str(exc.value)


@pytest.mark.parametrize("flag", [None, False, "false", "no"])
def test_without_the_flag_it_is_recreated_as_before(flag):
    _, plan = plan_json(node(preserve_ephemeral=flag), PREVIOUS)
    assert wipe_keeps(plan) == []
    assert "mkfs" in steps_on(plan, "/dev/vda1")


@pytest.mark.parametrize("flag", [True, "True", "yes", "1"])
def test_the_flag_is_read_as_ironic_reads_it(flag):
    _, plan = plan_json(node(preserve_ephemeral=flag), PREVIOUS)
    assert steps_on(plan, "/dev/vda1") == ["partition"]


def test_a_flag_that_is_no_boolean_is_refused():
    with pytest.raises(InputError) as exc:
        planned(node(preserve_ephemeral="maybe"), PREVIOUS)
    assert "instance_info.preserve_ephemeral: 'maybe' is not a boolean" in str(exc.value)


def test_an_inventory_without_the_table_plans_it_kept_and_says_the_run_decides():
    p, plan = plan_json(node())
    assert wipe_keeps(plan) == [1]
    assert any("records no partition table for /dev/vda" in w for w in plan["warnings"])


def test_a_given_layouts_partition_sized_ephemeral_gb_is_kept():
    layout = {"version": 1, "disks": [{"id": "d", "match": {"serial": "s1"}, "table": "gpt",
                                       "partitions": [
                                           {"id": "eph", "size": "ephemeral_gb"},
                                           {"id": "root", "size": "root_gb"},
                                           # BIOS boot from GPT (issue 56: checked)
                                           {"id": "bios", "size": 1, "type": "bios_grub"}]}],
              "filesystems": [{"device": "eph", "type": "ext4", "mount": "/data"},
                              {"device": "root", "type": "ext4", "mount": "/"}]}
    found = table((1, 2048, GIB_SECTORS), label="gpt")
    _, plan = plan_json(node(layout=layout), found)
    assert wipe_keeps(plan) == [1]
    assert "mkfs" not in steps_on(plan, "/dev/vda1")


def test_a_given_layouts_logical_volume_sized_ephemeral_gb_alone_is_refused():
    layout = {"version": 1, "disks": [{"id": "d", "match": {"serial": "s1"}, "table": "gpt",
                                       "partitions": [{"id": "root", "size": "root_gb"},
                                                      {"id": "pv", "size": "remaining",
                                                       "type": "lvm"}]}],
              "volume_groups": [{"id": "vg", "pvs": ["pv"], "logical_volumes": [
                  {"id": "eph", "size": "ephemeral_gb"}]}],
              "filesystems": [{"device": "eph", "type": "ext4", "mount": "/data"},
                              {"device": "root", "type": "ext4", "mount": "/"}]}
    with pytest.raises(InputError) as exc:
        planned(node(layout=layout), None)
    assert "layout.volume_groups[0].logical_volumes[0]" in str(exc.value)
    assert "its volume group is not kept" in str(exc.value)


def test_a_whole_disk_image_says_the_flag_has_no_effect():
    layout = IronicDriver(node(kernel=None, ramdisk=None, ephemeral_gb=None)).layout()
    assert any("preserve_ephemeral has no effect on a whole-disk image" in w
               for w in layout.warnings)


@pytest.mark.parametrize("rebuild,kept", [(True, [1]), (None, [1]), (False, [])])
def test_the_instances_first_deploy_keeps_nothing_whatever_the_flag(rebuild, kept):
    """Through Ironic the document says whether this is a rebuild of the same instance: on
    its first deploy the disk holds nothing of its own (a previous tenant's, with cleaning
    off), so the ephemeral partition is made anew."""
    doc = node()
    if rebuild is not None:
        doc["rebuild"] = rebuild
    _, plan = plan_json(doc, PREVIOUS)
    assert wipe_keeps(plan) == kept
    assert ("mkfs" in steps_on(plan, "/dev/vda1")) == (not kept)
    if rebuild is False:
        assert any("first deploy" in w for w in plan["warnings"])
