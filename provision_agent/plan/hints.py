"""ironic_lib's root device hint matching, imported without what it drags in.

ironic_lib declares its namespace package through pkg_resources, and ironic_lib.utils imports
oslo.concurrency's processutils, which imports eventlet when it is installed (Debian's
python3-oslo.concurrency depends on it, so the ramdisk has it; eventlet then imports dnspython,
and distutils through setuptools). Hint matching uses none of them, yet they were 2.7 s of
the 5.4 s `import provision_agent.cli.main` took in the TCG VM (python3 -X importtime). Both are
hidden while ironic_lib imports (it falls back to pkgutil, processutils to plain subprocess)
and visible again afterwards, so a plugin that wants them still gets them. The import itself
waits for the first hint to match.
"""

import importlib
import sys

HIDDEN = ("eventlet", "pkg_resources")

_utils = None


def find_devices_by_hints(devices, hints):
    """ironic_lib.utils.find_devices_by_hints: the devices (dicts) that match every hint."""
    return _ironic_lib_utils().find_devices_by_hints(devices, hints)


def _ironic_lib_utils():
    global _utils
    if _utils is None:
        _utils = import_hiding("ironic_lib.utils", HIDDEN)
    return _utils


def import_hiding(name, hidden):
    """Import module name while the modules in hidden, if not imported yet, cannot be."""
    blocked = [m for m in hidden if m not in sys.modules]
    for m in blocked:
        sys.modules[m] = None       # `import m` now raises ImportError
    try:
        return importlib.import_module(name)
    finally:
        for m in blocked:
            if m in sys.modules and sys.modules[m] is None:
                del sys.modules[m]
