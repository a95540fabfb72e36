"""A real client, as Nova drives Ironic, in the libvirt lab (`tox -e
ironic-lab`): metalsmith 2.5.0, with the clouds.yaml of docs/ironic.md section 10 (no
Keystone), allocates the lab's machine by resource class and trait, deploys a Glance image
with a root size, an SSH key and a user, and builds the configdrive itself. The allocation
puts the trait into instance_info, where it runs the deploy template that picks the layout
(two disks, RAID1 + LVM, the root LV sized by metalsmith's --root-size). The installed system
boots to its marker, having found the key (root's authorized_keys) and the user data on
metalsmith's configdrive; `metalsmith undeploy` then releases the node, which is cleaned
and available again. Every command comes from the guide (tests/ironic/guide.py).
"""

import hashlib
import json
import os
import time

import pytest
from metalsmith import instance_config

from tests.ironic import guide
from tests.ironic.lab import env as lablib
from tests.vmbench import ensure_ramdisk, images
from tests.vmbench.ramdisk import client_key

DEPLOY_TIMEOUT = 1200
NAME = "metalsmith"
TRAIT = "CUSTOM_RAID1_LVM"          # the guide's template and trait blocks name it
MARKER = lablib.MARKER + r" mpath=\S+ root=(\S+) keys=(\S+) ud=(\S+)"
USER = "ops"


def _layout():
    """The guide's raid1-lvm layout (samples/two-disk-raid-lvm.json) with its root LV sized
    by the flavor's (here metalsmith's) root size, and the kernel on the serial console."""
    layout = json.loads((lablib.SAMPLES / "two-disk-raid-lvm.json").read_text())
    lvs = layout["volume_groups"][0]["logical_volumes"]
    next(lv for lv in lvs if lv["id"] == "lv-root")["size"] = "root_gb"
    layout["bootloader"] = {"kernel_params": "console=ttyS0"}
    return layout


@pytest.fixture(scope="module")
def lab(test_os):
    workdir = lablib.workdir()
    layouts = os.path.join(workdir, "layouts")
    os.makedirs(layouts)
    with open(os.path.join(layouts, "raid1-lvm.json"), "w") as f:
        json.dump(_layout(), f)
    opts = dict(lablib.provision_opts(DEPLOY_TIMEOUT), layouts_dir=layouts)
    with lablib.Lab(workdir, ensure_ramdisk(), {NAME: "bios"}, opts, serve_dir=test_os,
                    glance=True, automated_clean=True) as the_lab:
        yield the_lab


def test_metalsmith_deploys_by_resource_class_and_trait_and_undeploys(lab, test_os, tmp_path):
    dom = lab.domains[NAME]
    times = {}
    t = time.monotonic()
    uuid = lab.enroll(NAME, provide_timeout=DEPLOY_TIMEOUT)
    times["enroll+provide (cleaning)"] = time.monotonic() - t
    image = lab.glance.create_image(test_os / "root.ext4.zst", "test-os-root")
    env = {"OS_AUTH_TYPE": "none", "OS_ENDPOINT": lab.ironic.url, "NODE": NAME,
           "RESOURCE_CLASS": "baremetal-lab", "IRONIC_URL": lab.ironic.url,
           "GLANCE_URL": lab.glance.url, "GLANCE_IMAGE": image["id"],
           "SSH_PUBLIC_KEY": str(client_key().with_suffix(".pub")), "INSTANCE_USER": USER}
    for block in ("template", "resource-class", "trait"):
        guide.run(block, env)
    guide.run("clouds-yaml", env, cwd=tmp_path)

    console_at = len(dom.console_text())
    t = time.monotonic()
    guide.run("metalsmith-deploy", env, cwd=tmp_path, timeout=DEPLOY_TIMEOUT + 300)
    times["metalsmith deploy to active"] = time.monotonic() - t
    node = lab.ironic.node(uuid)
    assert node["provision_state"] == "active", node["last_error"]
    allocation = lab.ironic.get(f"/v1/allocations/{node['allocation_uuid']}")
    assert allocation["resource_class"] == "baremetal-lab" and allocation["traits"] == [TRAIT]
    assert node["instance_uuid"] == allocation["uuid"]
    info, dii = node["instance_info"], node["driver_internal_info"]
    # the allocation's trait ran the deploy template, which chose the layout
    assert info["traits"] == [TRAIT] and info["image_source"] == image["id"]
    assert info["root_gb"] == 2
    assert dii["provision_layout_step"]["name"] == "raid1-lvm", dii
    assert dii["provision_exit_code"] == 0
    done = [e["kind"] for e in dii["provision_events"]
            if e["event"] == "step" and e["status"] == "done"]
    assert "configdrive" in done and "md_create" in done and "lv_create" in done, done

    t = time.monotonic()
    marker = dom.wait_console(MARKER, 900, since=console_at)
    times["instance boot to marker"] = time.monotonic() - t
    cd, root, keys, user_data = marker.groups()
    assert cd != "none", "the installed system did not find its configdrive"
    assert "lvm" in root and "raid1" in root, root
    key = client_key().with_suffix(".pub").read_text().split()
    assert keys == key[1], (keys, key)      # root's authorized_keys, from meta_data
    # cloud-init's user data as metalsmith's CLI writes it for --user-name
    config = instance_config.CloudInitConfig(ssh_keys=[" ".join(key)])
    config.add_user(USER, sudo=True)
    expected = hashlib.sha256(config.populate_user_data().encode()).hexdigest()[:16]
    assert user_data == expected, (user_data, expected)

    t = time.monotonic()
    guide.run("metalsmith-undeploy", env, cwd=tmp_path, timeout=DEPLOY_TIMEOUT + 300)
    times["metalsmith undeploy + cleaning to available"] = time.monotonic() - t
    node = lab.ironic.node(uuid)
    assert node["provision_state"] == "available", node["last_error"]
    assert node["instance_uuid"] is None and node["allocation_uuid"] is None
    assert lab.ironic.get("/v1/allocations")["allocations"] == []
    assert dom.state() == "shut off"
    for path in dom.disk_images:
        assert images.partition_table(path) is None, path
    # allocated, so it had an instance UUID: its power actions reported to no Nova
    assert "send a power notification" not in lab.ironic.log_text()
    lablib.report_times("metalsmith", times)
