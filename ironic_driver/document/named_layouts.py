"""Layouts named by a source instead of spelled out: NAME means the file
<[provision_agent]layouts_dir>/NAME.json on the conductor, never a file outside that
directory. Names are resolved on the conductor; the ramdisk always receives the layout."""

import json
import os
import re

from ironic.common import exception

# A name is a file name in one directory: no separators, no leading dot, short.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_BYTES = 1 << 20


def invalid(where, msg):
    return exception.InvalidParameterValue(f"{where}: {msg}")


def _layouts_dir():
    from ironic.conf import CONF

    from ironic_driver import config
    config.register(CONF)
    return CONF.provision_agent.layouts_dir


def load_named(name, where, layouts_dir=None):
    """The layout in <layouts_dir>/<name>.json; never a file outside that directory."""
    layouts_dir = layouts_dir if layouts_dir is not None else _layouts_dir()
    if not NAME_RE.fullmatch(name):
        raise invalid(where, f"{name[:80]!r} is neither a layout (JSON object) nor a layout "
                              "name (1-64 of A-Z a-z 0-9 . _ -, not starting with . _ -)")
    if not layouts_dir:
        raise invalid(where, f"names layout {name!r} but [provision_agent]layouts_dir is "
                              "not set on this conductor")
    base = os.path.realpath(layouts_dir)
    path = os.path.realpath(os.path.join(base, name + ".json"))
    if os.path.dirname(path) != base:
        # A symlink in the directory pointing elsewhere: not ours to read.
        raise invalid(where, f"layout {name!r} resolves outside {layouts_dir}")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        known = sorted(f[:-5] for f in _listdir(base) if f.endswith(".json"))
        raise invalid(where, f"no layout named {name!r} in {layouts_dir} (known: "
                              f"{', '.join(known[:20]) or 'none'})")
    except OSError as exc:
        raise invalid(where, f"cannot read layout {name!r}: {exc.strerror or exc}")
    if len(data) > MAX_BYTES:
        raise invalid(where, f"layout file {path} is larger than {MAX_BYTES} bytes")
    try:
        layout = json.loads(data)
    except ValueError as exc:
        raise invalid(where, f"layout file {path} is not valid JSON: {exc}")
    if not isinstance(layout, dict):
        raise invalid(where, f"layout file {path} does not hold a JSON object")
    return layout


def _listdir(path):
    try:
        return os.listdir(path)
    except OSError:
        return []


def resolve(value, where, layouts_dir=None):
    """(name or None, layout dict) from what a source holds."""
    if isinstance(value, dict):
        return None, value
    if not isinstance(value, str):
        raise invalid(where, f"must be a layout (JSON object) or a layout name, not "
                              f"{type(value).__name__}")
    text = value.strip()
    if text.startswith("{"):
        if len(text) > MAX_BYTES:
            raise invalid(where, f"layout text is larger than {MAX_BYTES} bytes")
        try:
            layout = json.loads(text)
        except ValueError as exc:
            raise invalid(where, f"layout text is not valid JSON: {exc}")
        return None, layout
    return text, load_named(text, where, layouts_dir)
