"""Mutated samples of all three data drivers never crash provision, and what is accepted plans
consistently.

Every mutant ends in exit 0, 2 or 3 with no traceback; a refusal names where each problem is; an
accepted one is checked against its own JSON plan: partitions inside their disk and apart,
every referenced device planned, every mount point once. A watchdog fails a run that hangs.
"""

import copy
import json
import re
import signal

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from provision_agent.plan import validate_text
from tests.unit.helpers import run_cli, sample

SAMPLES = {
    "native": [("single-disk", "three-disks"), ("two-disk-raid-lvm", "three-disks"),
               ("uefi", "three-disks"), ("msdos-logical", "three-disks"),
               ("three-disk-raid5-raid0-striped", "three-disks")],
    "nailgun": [("provision-vm", "three-disks"), ("provision", "fuel-three-disks")],
    "ironic": [("ironic-layout", "three-disks"), ("ironic-partition-image", "three-disks"),
               ("ironic-whole-disk", "three-disks")],
}
EXAMPLES = 1000          # per data driver (the issue asks for at least 1,000)
WATCHDOG_S = 20          # one document; far above any real run, catches a hang

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10 ** 20), 10 ** 20) | st.floats()
    | st.text(max_size=8) | st.sampled_from(["remaining", "50%", "1GiB", "/", "raid", "md-os",
                                              "disk0", "root", "lv-root", "boot0"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6),
                                                                      children, max_size=3),
    max_leaves=6)

# Values of the right type, so that many mutants pass the schema and reach the semantic and
# machine checks (unknown references, sizes that do not fit, disks that do not exist).
plausible = st.sampled_from([
    "remaining", "50%", "100%", "1GiB", "9GiB", 5000, 1, "/", "/boot", "/var", "raid", "lvm",
    "md-os", "md-boot", "disk0", "disk1", "root", "lv-root", "boot0", "os0", "/dev/vdz",
    "/dev/vdc", 0, 5, 10, "1.0", "ext4", "xfs", "swap", "uefi", "bios", -1, -5000,
    10 ** 15, 2 ** 64, 1e308, "os", "image", "pv", "vg", "lv", "partition", "boot", "disk",
    "/dev/vda", "sda", "/var/", "//", "/../../etc", "\u00e9\u00e8\u4e2d", "a" * 300,
    "x" * 100_000, [], {}, {"a": 1}, [1, 2],
    # Names the nailgun translation builds its own ids from (d1-bios_grub, d1-v2): a disk or
    # volume group Fuel named so must not collide with them.
    "bios_grub", "v0", "v2", "v3", "v2-j0", "configdrive", "0-root", "md-boot"])


def paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def apply(doc, path, action, value):
    value = copy.deepcopy(value)      # sampled values are shared between examples
    if not path:
        return value if action == "replace" else doc
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    key = path[-1]
    if action == "delete":
        del parent[key]
    elif action == "duplicate" and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[key]))
    elif action == "nest":
        inner = parent[key]
        for _ in range(value):
            inner = [inner]
        parent[key] = inner
    else:
        parent[key] = value
    return doc


@st.composite
def mutated(draw, driver):
    name, inv = draw(st.sampled_from(SAMPLES[driver]))
    doc = sample(name)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(paths(doc))))
        action = draw(st.sampled_from(["replace", "replace", "delete", "duplicate"]))
        doc = apply(doc, path, action, draw(st.one_of(plausible, json_values)))
    if draw(st.integers(0, 9)) == 0:
        # Last, so that no other mutation has to walk or copy the deep part.
        doc = apply(doc, draw(st.sampled_from(list(paths(doc)))), "nest",
                    draw(st.integers(1, 200)))
    encoding = draw(st.sampled_from(["utf-8"] * 8 + ["utf-16", "latin-1"]))
    return doc, inv, encoding


def encode(doc, encoding):
    try:
        text = json.dumps(doc)
    except (RecursionError, ValueError):
        return None
    return text.encode(encoding, errors="replace")


def _alarm(signum, frame):
    raise TimeoutError(f"one document took more than {WATCHDOG_S} s")


TOP_KEYS = sorted({key for samples in SAMPLES.values() for name, _ in samples
                   for key in sample(name)} | {"ks_spaces"})
PLACE = re.compile(r"  - (\$|\S+\.json|--|options|(%s)\b)" % "|".join(TOP_KEYS))
# A Fuel document's problems are named in its own terms: no path of the translated native
# document, no id the translation made up (d0-v2, d0:sda, lv1-0-root, vg0-os).
NATIVE = re.compile(r"\$\.|'(d[0-9]+[-:]|lv[0-9]|vg[0-9])")


def check_outcome(rc, out, err, driver=None):
    assert "Traceback" not in err
    assert rc in (0, 2, 3), err
    if rc != 0:
        problems = [line for line in err.splitlines() if line.startswith("  - ")]
        assert problems, err
        for line in problems:
            # Every problem names where it is: a JSON path, an input file position, an option,
            # or a place in the foreign document (its top-level keys; Fuel's ks_spaces[i]).
            assert PLACE.match(line), line
            assert driver != "nailgun" or not NATIVE.search(line), line
        return
    check_plan(json.loads(out))


def check_plan(plan):
    """What an accepted document must plan: the invariants the executor relies on."""
    layout = plan["layout"]
    devices = set()
    for disk in layout["disks"]:
        sector = disk.get("logical_block_size", 512)
        end = disk["size"] - (33 * sector if disk["table"] == "gpt" else 0)
        primaries = [p for p in disk["partitions"] if p["kind"] != "logical"]
        logicals = [p for p in disk["partitions"] if p["kind"] == "logical"]
        for group in (primaries, logicals):
            spans = sorted((p["offset"], p["offset"] + p["size"]) for p in group)
            for (s1, e1), (s2, _) in zip(spans, spans[1:]):
                assert e1 <= s2, f"overlapping partitions on {disk['device']}: {spans}"
        extended = [p for p in primaries if p["kind"] == "extended"]
        for p in disk["partitions"]:
            assert sector <= p["offset"] < p["offset"] + p["size"] <= end, (disk["device"], p)
            assert p["offset"] % sector == p["size"] % sector == 0, p
            if p["kind"] == "logical":
                ext = extended[0] if extended else None
                assert ext and ext["offset"] < p["offset"] and \
                    p["offset"] + p["size"] <= ext["offset"] + ext["size"], p
            devices.add(p["device"])
        devices.add(disk["device"])
    for raid in layout["raids"]:
        for member in raid["members"] + raid["spares"]:
            assert member in devices, f"raid member {member} is not planned"
        devices.add(raid["device"])
    for vg in layout["volume_groups"]:
        for pv in vg["pvs"]:
            assert pv in devices, f"PV {pv} is not planned"
        assert sum(lv["size"] for lv in vg["logical_volumes"]) <= vg["size"], vg
        devices.update(lv["device"] for lv in vg["logical_volumes"])
    mounts = [fs["mount"] for fs in layout["filesystems"] if fs.get("mount")]
    assert len(mounts) == len(set(mounts)), f"a mount point twice: {mounts}"
    for mount in mounts:
        assert validate_text.mount_point_problem(mount) is None, mount
    members = {m for raid in layout["raids"] for m in raid["members"] + raid["spares"]}
    members |= {pv for vg in layout["volume_groups"] for pv in vg["pvs"]}
    for fs in layout["filesystems"]:
        assert fs["device"] not in members, f"a filesystem on raid member/PV {fs['device']}"
    for fs in layout["filesystems"]:
        assert fs["device"] in devices, f"filesystem on unplanned {fs['device']}"


@pytest.mark.parametrize("driver", sorted(SAMPLES))
def test_mutations_exit_cleanly_and_plan_consistently(tmp_path, driver):
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture,
                                     HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(mutated(driver))
    def run(case):
        doc, inv, encoding = case
        raw = encode(doc, encoding)
        if raw is None:
            return
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(WATCHDOG_S)
        try:
            rc, out, err = run_cli(tmp_path, None, inv, raw=raw,
                                   extra=["--data_driver", driver, "--plan_format", "json"])
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
        event(f"exit {rc}")
        check_outcome(rc, out, err, driver)

    run()



@pytest.mark.parametrize("driver,name,path,value,where", [
    # Each of these was an "unexpected error" (exit 1) found by the mutations above.
    ("nailgun", "provision-vm", ("ks_meta", "pm_data", "ks_spaces", 0, "volumes", 1, "mount"),
     {"a": 1}, "ks_spaces[0] (vda) volumes[1].mount: must be a string or null, not an object"),
    ("nailgun", "provision-vm", ("interfaces",), "eth0",
     "interfaces: must be an object, not a string"),
    ("nailgun", "provision-vm", ("ks_meta", "image_data"), "http://x/",
     "ks_meta.image_data: must be an object or null, not a string"),
    ("nailgun", "provision-vm", ("ks_meta", "pm_data"), "x",
     "ks_meta.pm_data: must be an object, not a string"),
    ("ironic", "ironic-partition-image", ("instance_info", "image_checksum"), 5,
     "instance_info.image_checksum: must be a string or null, not an integer"),
    ("native", "single-disk", ("disks", 0, "partitions", 1, "size"), "9" * 30 + "TiB",
     "larger than any disk"),
])
def test_wrong_types_found_by_mutation_exit_2_at_their_place(tmp_path, driver, name, path,
                                                             value, where):
    rc, out, err = run_cli(tmp_path, apply(sample(name), path, "replace", value), "three-disks",
                           extra=["--data_driver", driver])
    assert rc == 2, err
    assert where in err


@pytest.mark.parametrize("driver,name,path", [
    ("nailgun", "provision-vm", ("ks_meta", "authorized_keys")),
    ("nailgun", "provision-vm", ("ks_meta", "pm_data", "ks_spaces", 0, "id")),
    ("nailgun", "provision-vm", ("uid",)),
    ("ironic", "ironic-layout", ("instance_info", "image_source")),
    ("ironic", "ironic-layout", ("layout", "disks", 0, "match", "serial")),
    ("native", "two-disk-raid-lvm", ("disks", 0, "match", "name")),
    ("native", "two-disk-raid-lvm", ("filesystems", 0, "label")),
])
def test_a_10_mb_string_exits_cleanly(tmp_path, driver, name, path):
    doc = apply(sample(name), path, "replace", "x" * 10_000_000)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(WATCHDOG_S)
    try:
        rc, out, err = run_cli(tmp_path, doc, "three-disks",
                               extra=["--data_driver", driver, "--plan_format", "json"])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    check_outcome(rc, out, err)
    assert "x" * 1000 not in err, "an error echoed the whole string"
