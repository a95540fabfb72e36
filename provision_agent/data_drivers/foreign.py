"""A data driver for a foreign format that translates into a native document
(base.py has the contract): ForeignDriver.native_layout() builds the layout with the native
driver's checks, every problem and object located in the foreign format's own paths.
"""

import copy
import re

from provision_agent.data_drivers.base import DataDriver
from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError, Problem

_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]")


class ForeignDriver(DataDriver):
    def native_layout(self, native, origin=None):
        """The layout of `native` (a native-format document), with problems and objects
        located by `origin` ({"$.disks[0]": "$.storage.drives[2]", ...})."""
        origin = dict(origin or {})
        native = copy.deepcopy(native)
        for path, theirs in origin.items():
            found = at_path(native, path)
            if isinstance(found, dict) and "origin" not in found and path != "$":
                found["origin"] = theirs
        self.native = native    # what Ironic's document completes (ironic_vendor.py)
        try:
            return NativeDriver(native).layout()
        except InputError as exc:
            raise InputError([Problem(relocate(p.location, origin), p.message)
                              for p in exc.problems]) from None


def at_path(document, path):
    """The value at a JSON path of the form $.a.b[2].c, or None."""
    if not path.startswith("$"):
        return None
    node, rest = document, path[1:]
    while rest:
        m = _STEP.match(rest)
        if not m:
            return None
        key, index = m.group(1), m.group(2)
        if key is not None:
            node = node.get(key) if isinstance(node, dict) else None
        else:
            node = node[int(index)] if isinstance(node, list) and int(index) < len(node) \
                else None
        if node is None:
            return None
        rest = rest[m.end():]
    return node


def relocate(location, origin):
    """location with its longest native-path prefix in origin replaced by the input's path."""
    best = None
    for path in origin:
        if location == path or location.startswith((path + ".", path + "[", path + ":")):
            if best is None or len(path) > len(best):
                best = path
    return location if best is None else origin[best] + location[len(best):]
