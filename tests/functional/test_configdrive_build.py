"""Build each configdrive form into a file and read it back (blkid label, ISO listing, content)."""

import base64
import gzip
import json
import os
import shutil
import subprocess

import pytest

from provision_agent.drivers import configdrive
from provision_agent.run.runner import Runner

NEED = ("genisoimage", "mcopy", "mkfs.vfat", "blkid", "isoinfo")
MISSING = [t for t in NEED if not shutil.which(t)]
if MISSING and os.environ.get("CI") == "true":
    raise RuntimeError(f"missing tools: {MISSING}")
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"missing {MISSING}")

META = {"uuid": "u-1", "hostname": "node-1"}
NET = {"links": [], "networks": [], "services": []}


def _label(path):
    return subprocess.run(["blkid", "-p", "-o", "value", "-s", "LABEL", str(path)],
                          capture_output=True, text=True, check=True).stdout.strip()


def _dev(tmp_path, size=64 << 20):
    dev = tmp_path / "part"
    with open(dev, "wb") as f:
        f.truncate(size)
    return dev


def test_config2_built_from_json(tmp_path):
    dev = _dev(tmp_path)
    n = configdrive.write(Runner(), {"device": str(dev), "format": "config-2", "meta_data": META,
                                     "user_data": "#!/bin/sh\necho hi\n", "network_data": NET})
    assert _label(dev) == "config-2"
    data = subprocess.run(["isoinfo", "-R", "-i", str(dev), "-x",
                           "/openstack/latest/meta_data.json"],
                          capture_output=True, check=True).stdout
    assert json.loads(data) == META
    ls = subprocess.run(["isoinfo", "-R", "-f", "-i", str(dev)], capture_output=True,
                        text=True, check=True).stdout.split()
    assert "/openstack/latest/user_data" in ls and "/openstack/latest/network_data.json" in ls
    assert 0 < n < 64 << 20


def test_nocloud_built_from_json(tmp_path):
    dev = _dev(tmp_path)
    configdrive.write(Runner(), {"device": str(dev), "format": "nocloud", "meta_data": META,
                                 "user_data": "#cloud-config\n", "network_data": NET})
    assert _label(dev) == "cidata"
    got = subprocess.run(["mtype", "-i", str(dev), "::/meta-data"], capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(got) == META


def test_ironic_gzip_base64_iso_is_written_verbatim(tmp_path):
    iso = tmp_path / "src.iso"
    configdrive.build_config2(Runner(), META, None, None, str(iso))
    content = base64.b64encode(gzip.compress(iso.read_bytes())).decode()
    dev = _dev(tmp_path)
    configdrive.write(Runner(), {"device": str(dev), "format": "config-2", "content": content})
    raw = iso.read_bytes()
    with open(dev, "rb") as f:
        assert f.read(len(raw)) == raw
    assert _label(dev) == "config-2"


def test_too_small_partition_is_refused(tmp_path):
    dev = _dev(tmp_path, size=4096)
    with pytest.raises(Exception, match="holds only 4096"):
        configdrive.write(Runner(), {"device": str(dev), "format": "config-2", "meta_data": META})
