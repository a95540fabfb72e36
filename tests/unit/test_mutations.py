"""Random mutations of the samples never crash provision: exit 0, 2 or 3, located, no traceback."""

import copy
import re

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.unit.helpers import run_cli, sample

SAMPLES = [("single-disk", "three-disks"), ("two-disk-raid-lvm", "three-disks"),
           ("uefi", "three-disks")]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10 ** 12) | st.floats(allow_nan=False)
    | st.text(max_size=8) | st.sampled_from(["remaining", "50%", "1GiB", "/", "raid", "md-os",
                                              "disk0", "root", "lv-root", "boot0"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6),
                                                                      children, max_size=3),
    max_leaves=6)


def paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def apply(doc, path, action, value):
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
    else:
        parent[key] = value
    return doc


# Values of the right type, so that many mutants pass the schema and reach the semantic and
# machine checks (unknown references, sizes that do not fit, disks that do not exist).
plausible = st.sampled_from([
    "remaining", "50%", "100%", "1GiB", "9GiB", 5000, 1, "/", "/boot", "/var", "raid", "lvm",
    "md-os", "md-boot", "disk0", "disk1", "root", "lv-root", "boot0", "os0", "/dev/vdz",
    "/dev/vdc", 0, 5, 10, "1.0", "ext4", "xfs", "swap", "uefi", "bios"])


@st.composite
def mutated(draw):
    name, inv = draw(st.sampled_from(SAMPLES))
    doc = sample(name)
    for _ in range(draw(st.integers(1, 3))):
        all_paths = list(paths(doc))
        path = draw(st.sampled_from(all_paths))
        action = draw(st.sampled_from(["replace", "delete", "duplicate"]))
        value = draw(st.one_of(plausible, json_values))
        doc = apply(doc, path, action, value)
    return doc, inv


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutated())
def test_mutations_exit_cleanly_with_locations(tmp_path, case):
    doc, inv = case
    rc, out, err = run_cli(tmp_path, doc, inv)
    event(f"exit {rc}")
    assert "Traceback" not in err
    assert rc in (0, 2, 3), err
    if rc == 0:
        assert "Plan (" in out
    else:
        problems = [line for line in err.splitlines() if line.startswith("  - ")]
        assert problems, err
        for line in problems:
            # Every problem names where it is: a JSON path, an input file position, or an option.
            assert re.match(r"  - (\$|\S+\.json|--|options)", line), line
