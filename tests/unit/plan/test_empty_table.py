"""A disk that names its table and lists no partitions gets an empty table of that kind
(issue 56: the table was ignored and the disk left wiped, with none; curtin writes an empty
label). A disk used whole holds no table, so naming one there is refused."""

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline
from tests.unit.helpers import mutate

DISKS = [inv_mod.normalize({"name": f"/dev/{n}", "size": 8 << 30}) for n in ("vda", "vdb")]


def doc(**second):
    return {"version": 1,
            "disks": [{"id": "a", "match": {"name": "/dev/vda"}},
                      {"id": "b", "match": {"name": "/dev/vdb"}, **second}],
            "filesystems": [{"device": "a", "type": "ext4", "mount": "/"}]}


def steps(layout):
    return pipeline.build_plan(NativeDriver(layout).layout(), DISKS).steps


@pytest.mark.parametrize("table", ["msdos", "gpt"])
def test_a_named_table_without_partitions_is_written_empty_after_the_wipe(table):
    got = [(s.kind, s.args.get("disk"), s.args.get("label")) for s in steps(doc(table=table))
           if s.kind in ("wipe", "partition_table", "partition", "settle")]
    assert got == [("wipe", "/dev/vda", None), ("wipe", "/dev/vdb", None),
                   ("partition_table", "/dev/vdb", table)]
    (step,) = [s for s in steps(doc(table=table)) if s.kind == "partition_table"]
    assert step.description == f"new empty {table} partition table on /dev/vdb"


def test_no_table_named_no_partitions_no_table():
    assert not [s for s in steps(doc()) if s.kind == "partition_table"]


def test_a_disk_used_whole_cannot_name_a_table():
    whole = mutate(doc(table="msdos"), lambda d: d["filesystems"].append(
        {"device": "b", "type": "xfs", "mount": "/srv"}))
    with pytest.raises(InputError) as exc:
        steps(whole)
    assert [str(p) for p in exc.value.problems] == [
        "$.disks[1]: table 'msdos' on a disk used whole (by a filesystem): it holds no "
        "partition table; leave table out, or give the disk partitions"]
    # the disk a filesystem uses whole, with no table named, stays as it was
    assert steps(mutate(whole, lambda d: d["disks"][1].pop("table")))
