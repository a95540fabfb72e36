"""Disks of 512-byte, 512e (512 logical, 4096 physical) and 4Kn sectors: the inventory records
the block sizes, the plan is in bytes and says which sectors its table is written in."""

import json

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError
from provision_agent.plan import inventory, pipeline, render
from provision_agent.plan.units import GiB, MiB

# the layout of issue 53: ESP 512 MiB, /boot 1 GiB, / the rest, on a 4 GiB disk
LAYOUT = {"version": 1,
          "disks": [{"id": "d", "match": {"name": "/dev/sda"}, "table": "gpt", "partitions": [
              {"id": "esp", "size": "512MiB", "type": "esp"},
              {"id": "boot", "size": "1GiB"},
              {"id": "root", "size": "remaining"}]}],
          "filesystems": [{"device": "esp", "type": "vfat", "mount": "/boot/efi"},
                          {"device": "boot", "type": "ext4", "mount": "/boot"},
                          {"device": "root", "type": "ext4", "mount": "/"}]}


def disks(**sizes):
    return inventory.from_document({"disks": [{"name": "sda", "size": 4 * GiB, **sizes}]})


@pytest.mark.parametrize("logical,physical", [(512, 512), (512, 4096), (4096, 4096)])
def test_the_plan_is_in_bytes_and_names_the_disks_sector_size(logical, physical):
    planned = pipeline.build_plan(NativeDriver(LAYOUT).layout(), disks(
        logical_block_size=logical, physical_block_size=physical))
    parts = [s.args for s in planned.steps if s.kind == "partition"]
    assert [(p["offset"], p["size"], p["sector_size"]) for p in parts] == [
        (MiB, 512 * MiB, logical), (513 * MiB, GiB, logical),
        (1537 * MiB, 4 * GiB - 1538 * MiB, logical)]
    doc = json.loads(render.plan_json(planned))["layout"]["disks"][0]
    assert (doc["logical_block_size"], doc["physical_block_size"]) == (logical, physical)
    assert doc["block_sizes_recorded"] is True
    assert [p["offset"] for p in doc["partitions"]] == [p["offset"] for p in parts]
    text = render.plan_text(planned)
    assert f"{logical}-byte sectors" in text and "assumed" not in text


def test_an_inventory_without_block_sizes_is_planned_for_512_and_says_so():
    found = disks()
    assert inventory.block_sizes(found[0]) == (512, 512, False)
    planned = pipeline.build_plan(NativeDriver(LAYOUT).layout(), found)
    assert {s.args["sector_size"] for s in planned.steps if s.kind == "partition"} == {512}
    assert "512-byte sectors (assumed: the inventory does not record them)" in \
        render.plan_text(planned)
    assert json.loads(render.plan_json(planned))["layout"]["disks"][0][
        "block_sizes_recorded"] is False


@pytest.mark.parametrize("sizes,said", [
    ({"logical_block_size": 520}, "logical_block_size 520 is not one partition tables"),
    ({"logical_block_size": "4096"}, "logical_block_size must be a number of bytes"),
    ({"logical_block_size": 4096, "physical_block_size": 512},
     "physical_block_size 512 is not a multiple of logical_block_size 4096"),
    ({"physical_block_size": True}, "physical_block_size must be a number of bytes"),
])
def test_an_inventory_with_impossible_block_sizes_is_refused(sizes, said):
    with pytest.raises(InputError) as exc:
        disks(**sizes)
    assert said in str(exc.value)


def test_a_kept_partition_keeps_its_bytes_on_a_4kn_disk():
    """keep: the partition stays at the same bytes; the plan says so in bytes and in the
    disk's sectors, which is what the preflight compares with the table on disk."""
    doc = json.loads(json.dumps(LAYOUT))
    doc["disks"][0]["partitions"][1]["keep"] = True
    planned = pipeline.build_plan(NativeDriver(doc).layout(),
                                  disks(logical_block_size=4096, physical_block_size=4096))
    kept = [s.args for s in planned.steps if s.kind == "partition" and s.args["keep"]]
    assert [(k["number"], k["offset"], k["size"], k["sector_size"]) for k in kept] == [
        (2, 513 * MiB, GiB, 4096)]
