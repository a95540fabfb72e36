"""A real Ironic's in-band inspection (its `agent` inspect interface) answered by our ramdisk's
agent: provision-ironic-agent, as the ramdisk's init starts it, collects this machine's
inventory (its real NIC and disks), posts it to ipa-inspection-callback-url, Ironic finds the
node by the NIC's MAC and stores the inventory, and validate then plans layouts against it."""

import json
import os
import subprocess
import sys

import pytest

from provision_agent.agent import inspection
from provision_agent.machine import disks as machine_disks
from tests import REPO_ROOT
from tests.ironic import realenv
from tests.ironic.conftest import require

ROOT = REPO_ROOT


@pytest.fixture(scope="module")
def ironic(ramdisk, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ironic-inspect"))
    server = realenv.Ironic(workdir, {
        "ssh_private_key_file": ramdisk.client_key_file,
        "poll_interval": 1, "connect_timeout": 5, "command_timeout": 20,
        "data_driver": "native", "remote_dir": os.path.join(workdir, "remote"),
    })
    server.start()
    yield server
    server.stop()


def _agent(tmp_path, callback, bootif):
    cmdline = tmp_path / "cmdline"
    # BOOTIF: the NIC the machine network-booted from, as Ironic's iPXE config passes it
    cmdline.write_text(f"console=ttyS0 ipa-inspection-callback-url={callback} "
                       f"BOOTIF={bootif}\n")
    argv = [realenv.bin_path("provision-ironic-agent") or sys.executable, "--cmdline_file",
            str(cmdline), "--host_key_file", str(tmp_path / "unused.pub")]
    (tmp_path / "unused.pub").write_text("ssh-ed25519 AAAA inspection\n")
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def test_our_agent_answers_ironics_inspection_and_validate_plans_against_it(ironic, ramdisk,
                                                                            tmp_path):
    nics = inspection.interfaces()
    require(nics, "a NIC with a device, whose MAC Ironic can find the node by")
    mac = nics[0]["mac_address"]
    uuid = ironic.enroll("inspected", {"provision_ssh_address": "127.0.0.1",
                                       "provision_ssh_port": ramdisk.port,
                                       "provision_host_key": ramdisk.host_key},
                         {"image_source": "http://127.0.0.1:9/img"}, macs=[mac],
                         interfaces={"inspect": "agent"})
    ironic.set_state(uuid, "manage")
    ironic.wait_state(uuid, ["manageable"], 30)
    ironic.set_state(uuid, "inspect")
    ironic.wait_state(uuid, ["inspect wait"], 60)
    done = _agent(tmp_path, f"{ironic.ramdisk_api_url}/v1/continue_inspection", mac)
    assert done.returncode == 0, done.stderr
    assert "Ironic took the inventory" in done.stderr and uuid in done.stderr, done.stderr
    node = ironic.wait_state(uuid, ["manageable", "inspect failed"], 120)
    assert node["provision_state"] == "manageable", node["last_error"]
    stored = ironic.get(f"/v1/nodes/{uuid}/inventory")["inventory"]
    here = machine_disks.discover()
    assert [(d["name"], d["size"]) for d in stored["disks"]] == \
        [(d["name"], d["size"]) for d in here]
    assert mac in [i["mac_address"] for i in stored["interfaces"]]
    # Ironic's ports hook keeps PXE on for the port the machine booted from: without it the
    # node's next network boot finds no boot configuration for its MAC (iPXE waits forever).
    assert stored["boot"]["pxe_interface"] == mac
    ports = ironic.get(f"/v1/ports?node={uuid}&fields=address,pxe_enabled")["ports"]
    assert [(p["address"], p["pxe_enabled"]) for p in ports] == [(mac, True)]
    # validate plans a layout against what was inspected: one that names a disk this machine
    # has passes, one that names another is refused before anything boots
    first = here[0]["name"]
    for disk, fits in ((first, True), ("/dev/nosuchdisk", False)):
        layout = {"version": 1, "disks": [{"id": "d", "match": {"name": disk},
                                           "partitions": [{"id": "root", "size": 1024}]}],
                  "filesystems": [{"device": "root", "type": "ext4", "mount": "/"}],
                  "images": [{"uri": "http://127.0.0.1:9/img.tar", "format": "tar",
                              "target": "/", "checksum": "sha256:" + "0" * 64}],
                  "bootloader": {"type": "none"}}
        ironic.request("PATCH", f"/v1/nodes/{uuid}", [
            {"op": "add", "path": "/instance_info/provision_layout", "value": layout}])
        result = ironic.get(f"/v1/nodes/{uuid}/validate")["deploy"]
        assert result["result"] is fits, json.dumps(result)
        if not fits:
            assert "does not fit this node's inspected inventory" in result["reason"]
            assert "no disk matches name='/dev/nosuchdisk'" in result["reason"]
