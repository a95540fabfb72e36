"""The native-format reference documents every field the schema accepts."""

import re

from provision_agent.data_drivers.native import schema
from tests.unit.helpers import REPO


def properties(node, found):
    if isinstance(node, dict):
        for name, sub in node.get("properties", {}).items():
            found.add(name)
            properties(sub, found)
        for value in node.values():
            properties(value, found)
    elif isinstance(node, list):
        for value in node:
            properties(value, found)
    return found


def test_every_schema_field_is_documented():
    doc = (REPO / "docs" / "native-format.md").read_text()
    documented = set(re.findall(r"`([a-z_][a-z0-9_]*)`", doc))
    missing = sorted(properties(schema(), set()) - documented)
    assert missing == []
