"""instance_info/image_source as a Glance image UUID, with a real Glance (tests/ironic/
realglance.py: sqlite, file store, no Keystone) and a real Ironic resolving it through its own
image handling ([agent]image_download_source = http: the conductor caches the image and
serves it from [deploy]http_root). The "ramdisk" is the local sshd running the real
`provision --dry_run`; test_power_cycle.py has a VM download, write and boot a Glance image."""

import hashlib
import json
import os

import pytest
import requests

from tests import REPO_ROOT
from tests.ironic import realenv, realglance
from tests.ironic.conftest import require
from tests.vmbench.httpserve import FileServer

ROOT = REPO_ROOT
LAYOUT = os.path.join(ROOT, "samples", "single-disk.json")
INVENTORY = os.path.join(ROOT, "samples", "inventory", "single-disk.json")


@pytest.fixture(scope="module")
def env(ramdisk, tmp_path_factory):
    require(os.path.exists("/usr/bin/python3"), "python3 to build Glance's venv")
    workdir = str(tmp_path_factory.mktemp("glance-ironic"))
    glance = realglance.Glance(workdir).start()
    httpboot = os.path.join(workdir, "httpboot")
    os.makedirs(httpboot)
    with FileServer(httpboot) as http:
        ironic = realenv.Ironic(
            workdir, realenv.dry_run_options(ramdisk, workdir, INVENTORY),
            extra_conf=realglance.ironic_conf(glance, workdir, http.url()))
        ironic.start()
        ironic.remote_dir = os.path.join(workdir, "remote")
        try:
            yield glance, ironic, http, workdir
        finally:
            ironic.stop()
            glance.stop()


def _enroll(ironic, ramdisk, name, image_source):
    with open(LAYOUT) as f:
        layout = json.load(f)
    return ironic.enroll(name, {"provision_ssh_address": "127.0.0.1",
                                "provision_ssh_port": ramdisk.port,
                                "provision_host_key": ramdisk.host_key},
                         {"image_source": image_source, "provision_layout": layout})


def test_a_glance_uuid_deploys_with_glances_bytes_and_checksum(env, ramdisk, tmp_path):
    glance, ironic, http, workdir = env
    path = tmp_path / "root.img"
    with open(path, "wb") as f:
        f.write(os.urandom(1 << 20) * 8)
    image = glance.create_image(str(path), "root")
    uuid = _enroll(ironic, ramdisk, "glance-good", image["id"])
    ironic.set_state(uuid, "active")
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 120)
    assert node["provision_state"] == "active", node["last_error"]
    info = node["instance_info"]
    assert info["image_source"] == image["id"]
    assert info["image_url"] == "******"     # Ironic's API hides it (it may be signed)
    # provision received the conductor's URL and Glance's checksum, and planned that image.
    with open(os.path.join(ironic.remote_dir, uuid, "input.json")) as f:
        sent = json.load(f)["instance_info"]
    assert sent["image_url"] == http.url(f"agent_images/{uuid}"), sent   # [deploy]http_image_subdir
    assert sent["image_os_hash_algo"] == image["os_hash_algo"] == "sha512"
    assert sent["image_os_hash_value"] == image["os_hash_value"]
    with open(os.path.join(ironic.remote_dir, uuid, "output.log")) as f:
        assert sent["image_url"] in f.read()
    # What the conductor serves is what was uploaded to Glance, byte for byte.
    served = requests.get(sent["image_url"], timeout=30).content
    assert hashlib.sha512(served).hexdigest() == image["os_hash_value"]
    assert image["os_hash_value"] == realglance.file_digest(str(path), "sha512")
    # Undeploy drops the conductor's copy.
    ironic.set_state(uuid, "deleted")
    node = ironic.wait_state(uuid, ["available", "error"], 60)
    assert node["provision_state"] == "available", node["last_error"]
    assert requests.get(sent["image_url"], timeout=30).status_code == 404


def test_an_unknown_glance_image_is_refused_before_power_on(env, ramdisk):
    glance, ironic, http, workdir = env
    missing = "0b7a1a55-6a2c-4f3e-8d61-9a4f5c0e2a10"
    uuid = _enroll(ironic, ramdisk, "glance-missing", missing)
    resp = ironic.set_state(uuid, "active", ok=False)
    assert resp.status_code == 400, resp.text
    assert f"image_source {missing} is not a Glance image" in resp.text
    node = ironic.node(uuid)
    assert node["provision_state"] == "available"
    assert "provision_phase" not in node["driver_internal_info"]
