"""A real Ironic with [provision_agent]image_keyring: a layout image without a signature is
refused at validate, a signed one deploys, the keyring reaches the "ramdisk" (a local sshd
running the real `provision --dry_run`) beside the document and provision plans the image's
verification with it; the signature's armour shows nowhere this interface writes (the node's
driver_internal_info and last_error, the plan) nor in the conductor's log."""

import json
import os

import pytest

from tests import signing_keys
from tests.ironic import realenv
from tests.ironic.integration.test_deploy import INVENTORY, LAYOUT, ironic_remote

pytestmark = signing_keys.require()


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    made = signing_keys.Keys(str(tmp_path_factory.mktemp("gpg")))
    yield made
    made.close()


@pytest.fixture(scope="module")
def ironic(ramdisk, keys, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ironic"))
    server = realenv.Ironic(workdir, dict(realenv.dry_run_options(ramdisk, workdir, INVENTORY),
                                         data_driver="native", image_keyring=keys.keyring))
    server.start()
    yield server
    server.stop()


def _enroll(ironic, ramdisk, name, image):
    with open(LAYOUT) as f:
        layout = json.load(f)
    layout["images"] = [dict({"uri": "http://127.0.0.1:9/root.tar.zst", "format": "tar",
                              "target": "/", "checksum": "sha256:" + "a" * 64}, **image)]
    return ironic.enroll(name, {"provision_ssh_address": "127.0.0.1",
                                "provision_ssh_port": ramdisk.port,
                                "provision_host_key": ramdisk.host_key},
                         {"image_source": "http://127.0.0.1:9/root.tar.zst",
                          "provision_layout": layout})


def test_an_unsigned_image_is_refused_before_booting(ironic, ramdisk):
    uuid = _enroll(ironic, ramdisk, "unsigned", {})
    resp = ironic.set_state(uuid, "active", ok=False)
    assert resp.status_code == 400
    assert "no signature: a keyring is configured" in resp.text
    assert "provision_phase" not in ironic.node(uuid)["driver_internal_info"]


def test_a_signed_image_deploys_with_the_keyring_beside_the_document(ironic, ramdisk, keys,
                                                                    tmp_path):
    image = tmp_path / "root.tar.zst"
    image.write_bytes(b"the image as published")
    armour = keys.sign(image)
    uuid = _enroll(ironic, ramdisk, "signed", {"signature": armour})
    ironic.set_state(uuid, "active")
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 90)
    assert node["provision_state"] == "active", node["last_error"]
    job = os.path.join(ironic_remote(ironic), uuid)
    with open(os.path.join(job, "keyring.pgp"), "rb") as f, open(keys.keyring, "rb") as mine:
        assert f.read() == mine.read()
    with open(os.path.join(job, "output.log")) as f:
        plan = f.read()
    assert "its signature verified while it streams" in plan
    # what this interface shows (instance_info is the operator's own, as set)
    body = armour.splitlines()[2]
    node = ironic.node(uuid)
    shown = json.dumps([node["driver_internal_info"], node["last_error"]]) + plan
    assert body not in shown and body not in _logged_but_rpc(ironic)


def _logged_but_rpc(ironic):
    """The conductor's log without Ironic's own JSON-RPC trace. Where ironic-api and the
    conductor are two processes (Ironic 32: realenv.all_in_one_starts), Ironic's json_rpc
    client and server log each call's arguments at DEBUG, among them the node with the
    instance_info the operator set, signature and all; that is Ironic's, not this
    interface's."""
    return "\n".join(line for line in ironic.log_text().splitlines()
                     if " ironic.common.json_rpc." not in line)
