"""Every pattern runs in linear time and every string is bounded: the conductor validates the
same documents, and a regular expression that backtracks holds the GIL for seconds (once,
a size of "1" + 40,000 blanks + "x" took 8.4 s, 80,000 took 50.8 s)."""

import json
import re

import pytest

from provision_agent.data_drivers import native
from provision_agent.plan import units
from tests.unit.helpers import run_cli, sample

N = 100_000


def schema_patterns(node=None):
    node = native.schema() if node is None else node
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            yield node["pattern"]
        for value in node.values():
            yield from schema_patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from schema_patterns(value)


ADVERSARIAL = ["1" + " " * N + "x", " " * N + "x", "1" * N + "x", "a" * N + "!",
               "0" * N + "-", "1." + "1" * N + " x", "/" * N + "\n", "sha256:" + "a" * N + "g"]


def test_every_schema_pattern_is_linear(watchdog):
    patterns = sorted(set(schema_patterns()))
    assert len(patterns) >= 5
    for pattern in patterns:
        compiled = re.compile(pattern)
        for text in ADVERSARIAL:
            compiled.search(text)


def test_size_parsing_is_linear_and_bounded(watchdog):
    with pytest.raises(ValueError, match="at most 64 characters"):
        units.parse_size("1" + " " * 40_000 + "x")
    with pytest.raises(ValueError, match="unknown unit 'x'"):
        units.parse_size("1" + " " * 50 + "x")
    assert units.parse_size(" 10 GiB ").bytes == 10 << 30


def test_a_huge_size_in_a_document_is_refused_without_echo(tmp_path, watchdog):
    doc = sample("single-disk")
    doc["disks"][0]["partitions"][1]["size"] = "1" + " " * 80_000 + "x"
    rc, _, err = run_cli(tmp_path, doc, "single-disk")
    assert rc == 2
    assert "$.disks[0].partitions[1].size: longer than 64 characters" in err
    assert " " * 100 not in err


def test_every_string_in_the_schema_is_bounded():
    unbounded = []

    def walk(node, path):
        if isinstance(node, dict):
            types = node.get("type")
            types = [types] if isinstance(types, str) else (types or [])
            if "string" in types and "maxLength" not in node and "enum" not in node:
                unbounded.append(path)
            if "array" in types and "maxItems" not in node and "items" in node \
                    and path.endswith(("disks", "partitions", "raids", "volume_groups",
                                       "logical_volumes", "filesystems", "images")):
                unbounded.append(path + "[]")
            for key, value in node.items():
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(native.schema(), "$")
    assert unbounded == []


def test_input_larger_than_any_document_is_refused(tmp_path):
    from provision_agent.cli import input_source
    from provision_agent.errors import InputError
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.truncate(input_source.MAX_BYTES + 1)
    with pytest.raises(InputError, match="not an input document"):
        input_source.read_input(str(path))
    assert json.loads(json.dumps({"ok": 1}))
