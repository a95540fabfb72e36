"""Our own data drivers, image sources and decompressors are loaded without stevedore (whose
lookup scans and hashes every installed package's entry points: seconds per deploy in a
freshly booted ramdisk under emulation), and they stay the ones setup.cfg registers."""

import configparser
import os
import pathlib
import subprocess
import sys

from provision_agent.drivers.images import decompressors, sources
from provision_agent.plan import pipeline

ROOT = pathlib.Path(__file__).resolve().parents[3]


def registered(group):
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = cfg["options.entry_points"][group].strip().splitlines()
    return {name.strip(): value.strip() for name, value in (ln.split("=") for ln in lines)}


def dotted(cls):
    return f"{cls.__module__}:{cls.__qualname__}"


def test_the_built_in_maps_are_what_setup_cfg_registers():
    assert pipeline.BUILTIN_DATA_DRIVERS == registered("provision_agent.data_drivers")
    assert {k: dotted(v) for k, v in sources.BUILTIN.items()} == registered(
        "provision_agent.image_sources")
    assert {k: dotted(v) for k, v in decompressors.BUILTIN.items()} == registered(
        "provision_agent.decompressors")


CODE = """
import importlib.metadata, json, sys
scans = []
real = importlib.metadata.entry_points
importlib.metadata.entry_points = lambda *a, **k: scans.append(k) or real(*a, **k)
from provision_agent.plan import pipeline
from provision_agent.drivers.images import sources
doc = {"version": 1, "disks": [{"id": "d", "match": {"name": "/dev/vda"}}]}
for name in ("native", "nailgun", "ironic"):
    pipeline.data_driver_class(name)
pipeline.load_layout(doc, "native")
for scheme in ("file", "http", "https"):
    sources._source_class(scheme)
print(json.dumps({"stevedore": "stevedore" in sys.modules, "scans": len(scans)}))
"""


def test_a_run_with_our_own_plugins_neither_imports_stevedore_nor_scans_entry_points():
    res = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == '{"stevedore": false, "scans": 0}'
