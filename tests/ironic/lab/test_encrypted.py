"""An encrypted layout through Ironic in the libvirt lab (issue 32): a deploy template,
CUSTOM_ENCRYPTED_RAID1, whose set_layout step encrypts the RAID1 under LVM
(samples/encrypted-raid1-lvm.json) with a Tang server on the lab's network as the unlock; the
conductor's [provision_agent]recovery_age_recipients seals the recovery key (the layout names
none). Ironic deploys the test OS that can open it, boots it from disk, and it unlocks
unattended; the recovery key in driver_internal_info opens the header with the operator's age
identity; undeploy's cleaning leaves no LUKS header on either disk, read back from the host.

`tox -e ironic-lab -- -k encrypts` alone (outside CI: ~20 minutes).
"""

import json
import time

from tests.ironic.lab import env as lablib
from tests.vmbench import agekeys, ensure_ramdisk, images, testos
from tests.vmbench.tang import TangServer

DEPLOY_TIMEOUT = 1500
TRAIT = "CUSTOM_ENCRYPTED_RAID1"
ROOT_MARKER = r"PROVISION-BOOT-OK cd=(\S+) mpath=\S+ root=(\S+)"


def _template_layout(tang):
    layout = json.loads((lablib.SAMPLES / "encrypted-raid1-lvm.json").read_text())
    del layout["recovery"]              # the conductor's
    del layout["images"]                # the image comes through Ironic (image_source)
    layout["encrypted"][0]["unlock"] = {"tang": [{"url": tang.url,
                                                  "thumbprint": tang.thumbprint}]}
    return layout


def test_a_deploy_template_encrypts_the_raid1_and_the_instance_boots_unlocked_by_tang(
        tmp_path):
    crypt_os = testos.build_dir("crypt")
    identity, recipient = agekeys.keypair(tmp_path)
    opts = lablib.provision_opts(DEPLOY_TIMEOUT)
    opts["recovery_age_recipients"] = recipient
    times = {}
    with lablib.Lab(lablib.workdir(), ensure_ramdisk(), {"bios": "bios"}, opts,
                    serve_dir=crypt_os, cpus=2) as lab, \
            TangServer(tmp_path / "tang", address=lab.net.host_address) as tang:
        dom = lab.domains["bios"]
        t = time.monotonic()
        uuid = lab.enroll("bios", provide_timeout=DEPLOY_TIMEOUT)
        times["enroll+provide"] = time.monotonic() - t
        lab.ironic.request("POST", "/v1/deploy_templates", {
            "name": TRAIT, "steps": [{"interface": "deploy", "step": "set_layout",
                                      "priority": 150,
                                      "args": {"layout": _template_layout(tang)}}]})
        lab.ironic.request("PUT", f"/v1/nodes/{uuid}/traits/{TRAIT}")
        info = lablib.instance_info(lab, crypt_os, "bios")
        del info["provision_layout"]
        info["traits"] = [TRAIT]            # as Nova sets it from the flavor's required trait
        lablib.set_instance_info(lab.ironic, uuid, info)
        console_at = len(dom.console_text())
        t = time.monotonic()
        lab.ironic.set_state(uuid, "active")
        node = lablib.wait_state(lab.ironic, uuid, ["active"], DEPLOY_TIMEOUT + 120)
        times["deploy to active"] = time.monotonic() - t
        dii = node["driver_internal_info"]
        assert dii["provision_layout_step"]["source"] == "deploy step deploy.set_layout"
        keys = dii["provision_recovery_keys"]
        assert [k["name"] for k in keys] == ["cryptos"], keys
        phrase = agekeys.decrypt(identity, keys[0]["age"])
        assert phrase not in json.dumps(node)       # only the ciphertext is in the node
        asked = tang.requests

        t = time.monotonic()
        m = dom.wait_console(ROOT_MARKER, 1200, since=console_at)
        times["instance boot to marker"] = time.monotonic() - t
        assert "cryptos:crypt" in m.group(2) and ":raid1" in m.group(2), m.group(2)
        assert tang.requests > asked, "the instance did not ask Tang for its key"
        assert m.group(1) != "none", "the installed system did not find its configdrive"

        found = {p: images.luks_headers(p) for p in dom.disk_images}
        assert all(found.values()), found
        offset = found[dom.disk_images[0]][0][0]
        assert images.luks_opens(dom.disk_images[0], offset, phrase, tmp_path)

        t = time.monotonic()
        lab.ironic.set_state(uuid, "deleted")
        lablib.wait_state(lab.ironic, uuid, ["available"], DEPLOY_TIMEOUT + 120)
        times["undeploy + cleaning to available"] = time.monotonic() - t
        assert {p: images.luks_headers(p) for p in dom.disk_images} == \
            {p: [] for p in dom.disk_images}
        assert not images.luks_opens(dom.disk_images[0], offset, phrase, tmp_path)
    lablib.report_times("encrypted-template", times)
