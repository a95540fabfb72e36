"""The operator guide's commands against a real Ironic (tests/ironic/realenv.py; the local
sshd stands in for the ramdisk and runs the real `provision --dry_run` against a recorded
three-disk inventory): a flavor trait picks the layout through a deploy template and the
deploy reaches active with that layout; a layout that cannot fit the node's stored inventory
is refused before anything powers on. Every runnable block of docs/ironic.md is run here."""

import json
import os
import re
import threading

import pytest

from provision_agent.agent import netconfig
from tests.ironic import guide, realenv, realglance, realregistry
from tests.ironic.conftest import require
from tests.ironic.integration.test_heartbeat import AgentProcess
from tests.vmbench.httpserve import FileServer

ROOT = guide.ROOT
INVENTORY = os.path.join(ROOT, "samples", "inventory", "three-disks.json")
SMALL = os.path.join(ROOT, "samples", "inventory", "single-disk.json")
RAID1_LVM = os.path.join(ROOT, "samples", "two-disk-raid-lvm.json")
SINGLE = os.path.join(ROOT, "samples", "single-disk.json")


# Section 10: a conductor without Nova whose nodes get instance UUIDs from allocations.
NO_NOVA = "[nova]\nsend_power_notifications = false\n"


def _load(path):
    with open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def server(ramdisk, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("guide"))
    layouts = os.path.join(workdir, "layouts")
    os.makedirs(layouts)
    # As the guide installs them: files named after the layout, in layouts_dir.
    for name, path in (("raid1-lvm", RAID1_LVM), ("single-disk", SINGLE)):
        with open(os.path.join(layouts, name + ".json"), "w") as f:
            json.dump(_load(path), f)
    glance = realglance.Glance(workdir).start()
    registry_ca = realregistry.make_ca(workdir)     # before Ironic starts: it is given it
    os.makedirs(os.path.join(workdir, "httpboot"))
    http = FileServer(os.path.join(workdir, "httpboot")).__enter__()
    server = realenv.Ironic(
        workdir, dict(realenv.dry_run_options(ramdisk, workdir, INVENTORY), layouts_dir=layouts),
        extra_conf=realglance.ironic_conf(glance, workdir, http.url())
        + realregistry.ironic_conf(registry_ca) + NO_NOVA)
    # data_driver stays the default (ironic), as on a real conductor
    server.glance, server.registry_ca = glance, registry_ca
    try:
        server.start(env=realregistry.ironic_env(registry_ca))
        server.remote_dir = os.path.join(workdir, "remote")
        yield server
    finally:
        server.stop()
        http.__exit__(None, None, None)
        glance.stop()


def _env(server, ramdisk, node, mac):
    # The guide's `export OS_AUTH_TYPE=none OS_ENDPOINT=...`, with this Ironic's address.
    return {"OS_AUTH_TYPE": "none", "OS_ENDPOINT": server.url, "NODE": node,
            "HW_TYPE": "fake-hardware", "MAC": mac,
            "DEPLOY_KERNEL": "http://127.0.0.1:9/vmlinuz",
            "DEPLOY_RAMDISK": "http://127.0.0.1:9/initramfs",
            "RAMDISK_IP": "127.0.0.1", "RAMDISK_SSH_PORT": str(ramdisk.port),
            "RAMDISK_HOST_KEY": ramdisk.host_key,
            "IMAGE_URL": "http://127.0.0.1:9/root.img", "IMAGE_SHA256": "0" * 64}


@pytest.fixture(scope="module")
def template(server, ramdisk):
    guide.run("template", _env(server, ramdisk, "-", "-"))
    return "CUSTOM_RAID1_LVM"


def _enrolled(server, ramdisk, node, mac):
    env = _env(server, ramdisk, node, mac)
    for block in ("enroll", "available", "static-ssh"):
        guide.run(block, env)
    return env


def _show(env):
    return json.loads(guide.run("show", env).stdout)


def test_a_flavor_trait_picks_the_layout_through_a_deploy_template(server, ramdisk, template):
    env = _enrolled(server, ramdisk, "guide-raid", "52:54:00:00:00:01")
    guide.run("node-default", env)      # the node's default; the template must win over it
    guide.run("trait", env)
    guide.run("deploy", env, timeout=200)
    node = _show(env)
    assert node["provision_state"] == "active", node["last_error"]
    dii = node["driver_internal_info"]
    assert dii["provision_exit_code"] == 0
    assert dii["provision_layout_step"]["name"] == "raid1-lvm"
    assert dii["provision_layout_step"]["source"] == "deploy step deploy.set_layout"
    # Read back what the "ramdisk" received and what provision planned from it.
    uuid = server.node("guide-raid")["uuid"]
    with open(os.path.join(server.remote_dir, uuid, "input.json")) as f:
        sent = json.load(f)
    assert sent["layout"] == _load(RAID1_LVM)
    assert sent["instance_info"]["traits"] == [template]
    with open(os.path.join(server.remote_dir, uuid, "output.log")) as f:
        plan = f.read()
    assert "[md_create] RAID1 /dev/md/os over 2 members" in plan, plan
    assert "[lv_create] logical volume /dev/os/root 1.5GiB" in plan, plan
    guide.run("undeploy", env)
    assert server.node("guide-raid")["provision_state"] == "available"


def test_the_node_default_layout_without_a_trait(server, ramdisk, template):
    env = _enrolled(server, ramdisk, "guide-default", "52:54:00:00:00:02")
    guide.run("node-default", env)
    # The guide's deploy block asks for CUSTOM_RAID1_LVM, which this node lacks: refused.
    done = guide.run("deploy", env, timeout=200, ok=False)
    assert done.returncode != 0
    assert "CUSTOM_RAID1_LVM" in done.out
    assert server.node("guide-default")["provision_state"] == "available"
    server.request("PATCH", "/v1/nodes/guide-default", [
        {"op": "remove", "path": "/instance_info/traits"}])
    server.set_state("guide-default", "active")
    node = server.wait_state("guide-default", ["active", "deploy failed"], 90)
    assert node["provision_state"] == "active", node["last_error"]
    assert "provision_layout_step" not in node["driver_internal_info"]
    with open(os.path.join(server.remote_dir, node["uuid"], "input.json")) as f:
        assert json.load(f)["layout"] == _load(SINGLE)


def test_a_layout_that_cannot_fit_the_inspected_machine_is_refused(server, ramdisk, template):
    mac = "52:54:00:00:00:03"
    env = _env(server, ramdisk, "guide-small", mac)
    guide.run("enroll", env)
    # The guide's inspect block waits for the inspection; the "inspection ramdisk" (this
    # test) posts a one-disk inventory meanwhile, through Ironic's ramdisk API.
    inspecting = threading.Thread(target=guide.run, args=("inspect", env),
                                  kwargs={"timeout": 300})
    inspecting.start()
    try:
        server.wait_state("guide-small", ["inspect wait"], 120)
        server.post_inventory(mac, _load(SMALL))
    finally:
        inspecting.join(300)
    assert "inspect" in guide.RAN
    node = server.node("guide-small")
    assert node["provision_state"] == "available", node["last_error"]
    stored = server.get("/v1/nodes/guide-small/inventory")["inventory"]
    assert [d["name"] for d in stored["disks"]] == ["/dev/vda"]
    guide.run("static-ssh", env)
    guide.run("trait", env)
    done = guide.run("deploy", env, ok=False)
    assert done.returncode != 0
    assert "does not fit this node's inspected inventory" in done.out, done.out
    assert "deploy template CUSTOM_RAID1_LVM" in done.out
    assert "$.disks[1]: no disk matches name='/dev/vdb'" in done.out
    node = _show(env)
    assert node["provision_state"] == "available"
    assert "provision_phase" not in node["driver_internal_info"]   # never powered on


def test_a_flavor_asks_for_software_raid_as_for_ironic_python_agent(server, ramdisk):
    env = _enrolled(server, ramdisk, "guide-swraid", "52:54:00:00:00:05")
    guide.run("raid-template", env)
    guide.run("deploy-raid", env, timeout=200)
    node = _show(env)
    assert node["provision_state"] == "active", node["last_error"]
    assert node["driver_internal_info"]["provision_layout_step"]["source"] == \
        "deploy step raid.apply_configuration"
    uuid = server.node("guide-swraid")["uuid"]
    with open(os.path.join(server.remote_dir, uuid, "input.json")) as f:
        sent = json.load(f)["layout"]
    assert [(r["level"], r["members"]) for r in sent["raids"]] == [
        (1, ["md0-0", "md0-1"]), (0, ["md1-0", "md1-1"])]
    with open(os.path.join(server.remote_dir, uuid, "output.log")) as f:
        plan = f.read()
    assert "[md_create] RAID1 /dev/md/md0 over 2 members" in plan, plan
    assert "[md_create] RAID0 /dev/md/md1 over 2 members" in plan, plan
    guide.run("undeploy", env)


def test_software_raid_recorded_by_cleaning_is_built_on_every_inspected_disk(server,
                                                                           ramdisk):
    mac = "52:54:00:00:00:06"
    env = _env(server, ramdisk, "guide-cleanraid", mac)
    guide.run("enroll", env)
    inspecting = threading.Thread(target=guide.run, args=("inspect", env),
                                  kwargs={"timeout": 300})
    inspecting.start()
    try:
        server.wait_state("guide-cleanraid", ["inspect wait"], 120)
        server.post_inventory(mac, _load(INVENTORY))
    finally:
        inspecting.join(300)
    guide.run("static-ssh", env)
    guide.run("raid-cleaning", env)
    node = server.node("guide-cleanraid")
    assert node["raid_config"]["logical_disks"][0]["physical_disks"] == [
        {"serial": "disk0"}, {"serial": "disk1"}, {"serial": "disk2"}]
    server.request("PATCH", "/v1/nodes/guide-cleanraid", [
        {"op": "add", "path": "/instance_info/image_source", "value": "http://127.0.0.1:9/r"},
        {"op": "add", "path": "/instance_info/image_checksum", "value": "0" * 64}])
    server.set_state("guide-cleanraid", "active")
    node = server.wait_state("guide-cleanraid", ["active", "deploy failed"], 120)
    assert node["provision_state"] == "active", node["last_error"]
    with open(os.path.join(server.remote_dir, node["uuid"], "output.log")) as f:
        plan = f.read()
    assert "[md_create] RAID1 /dev/md/md0 over 3 members" in plan, plan


def test_a_glance_image_to_a_node_found_by_its_heartbeat(server, ramdisk, tmp_path):
    """Section 5 and 6: no static address (the agent's heartbeat brings it), a Glance UUID."""
    mac = "52:54:00:00:00:04"
    env = _env(server, ramdisk, "guide-glance", mac)
    for block in ("enroll", "available", "node-default"):
        guide.run(block, env)
    path = tmp_path / "root.img"
    path.write_bytes(os.urandom(1 << 20) * 4)
    image = server.glance.create_image(str(path), "guide-root")
    env["GLANCE_IMAGE"] = image["id"]
    with AgentProcess(tmp_path, server.ramdisk_api_url, mac, ramdisk.port,
                      ramdisk.host_key_file + ".pub", server.binding_dir,
                      server.remote_dir) as agent:
        done = guide.run("deploy-glance", env, timeout=200, ok=False)
        assert done.returncode == 0, (done.out, agent.text())
    node = _show(env)
    assert node["provision_state"] == "active", node["last_error"]
    dii = node["driver_internal_info"]
    assert dii["provision_ssh_address"] == "127.0.0.1"
    assert dii["provision_host_key"] == ramdisk.host_key
    with open(os.path.join(server.remote_dir, server.node("guide-glance")["uuid"],
                           "input.json")) as f:
        sent = json.load(f)["instance_info"]
    assert sent["image_source"] == image["id"]
    assert sent["image_os_hash_value"] == image["os_hash_value"]
    guide.run("undeploy", env)


def test_an_oci_image_with_a_pull_secret(server, ramdisk, tmp_path):
    """Section 6: an oci:// reference and its pull secret, from a local registry
    (tests/ironic/integration/test_oci.py checks the secret and the download)."""
    require(not realregistry.missing(), f"missing: {realregistry.missing()}")
    registry = realregistry.Registry(str(tmp_path), server.registry_ca).start()
    try:
        blob, _ = registry.push("images/guide", "v1",
                                b"\x00" * 510 + b"\x55\xaa" + os.urandom(1 << 16),
                                media_type="application/octet-stream", title="disk.raw")
        env = _enrolled(server, ramdisk, "guide-oci", "52:54:00:00:00:07")
        # a whole-disk image on a machine of three disks: the operator says which
        server.request("PATCH", "/v1/nodes/guide-oci", [
            {"op": "add", "path": "/properties/root_device", "value": {"serial": "disk1"}}])
        env.update(OCI_IMAGE=f"oci://{registry.host}/images/guide:v1",
                   PULL_SECRET=f"{registry.user}:{registry.password}")
        guide.run("deploy-oci", env, timeout=200)
        node = _show(env)
        assert node["provision_state"] == "active", node["last_error"]
        uuid = server.node("guide-oci")["uuid"]
        with open(os.path.join(server.remote_dir, uuid, "input.json")) as f:
            sent = json.load(f)["instance_info"]
        assert sent["image_url"] == f"{registry.url}/v2/images/guide/blobs/{blob}"
        assert sent["image_request_authorization_secret"] == registry.basic()
        with open(os.path.join(server.remote_dir, uuid, "output.log")) as f:
            assert f"disk image {sent['image_url']} to /dev/vdb" in f.read()
        guide.run("undeploy", env)
    finally:
        registry.stop()


def test_metalsmith_allocates_by_resource_class_and_trait(server, ramdisk, template, tmp_path):
    """Section 10: a real SDK client, as Nova drives Ironic. Allocations (Ironic's, then
    metalsmith's) pick the node by resource class and trait and put the trait into
    instance_info, where it runs the deploy template; metalsmith's configdrive reaches the
    "ramdisk". The libvirt lab boots the result (tests/ironic/test_lab_metalsmith.py)."""
    env = _enrolled(server, ramdisk, "guide-metalsmith", "52:54:00:00:00:08")
    key = tmp_path / "id.pub"
    key.write_text("ssh-ed25519 "
                   "AAAAC3NzaC1lZDI1NTE5AAAAIFQ1pfAkHvNm0b3cOMDHmumCqAqb0cA1WYBMXuCCEYGo guide\n")
    path = tmp_path / "root.img"
    path.write_bytes(os.urandom(1 << 20))
    env.update(RESOURCE_CLASS="baremetal-guide", IRONIC_URL=server.url,
               GLANCE_URL=server.glance.url, SSH_PUBLIC_KEY=str(key), INSTANCE_USER="ops",
               GLANCE_IMAGE=server.glance.create_image(str(path), "guide-metalsmith")["id"])
    for block in ("resource-class", "trait"):
        guide.run(block, env)
    # Allocations take only nodes whose power state Ironic knows: a real BMC's is read when
    # the node is managed; fake-hardware's is whatever it was last told.
    server.request("PUT", "/v1/nodes/guide-metalsmith/states/power", {"target": "power off"})
    realenv.wait_for(lambda: server.node("guide-metalsmith")["power_state"] == "power off", 30)
    # Ironic's own allocation: the trait lands in instance_info, no deploy needed to see it
    allocated = guide.run("allocation", env)
    node = server.node("guide-metalsmith")
    assert node["instance_info"]["traits"] == [template], (allocated.out, node)
    assert node["instance_uuid"] == node["allocation_uuid"]
    guide.run("allocation-delete", env)
    assert server.node("guide-metalsmith")["instance_uuid"] is None

    guide.run("clouds-yaml", env, cwd=tmp_path)
    guide.run("metalsmith-deploy", env, cwd=tmp_path, timeout=300)
    node = server.node("guide-metalsmith")
    assert node["provision_state"] == "active", node["last_error"]
    assert node["instance_info"]["traits"] == [template]
    assert node["instance_info"]["root_gb"] == 2
    assert node["driver_internal_info"]["provision_layout_step"]["name"] == "raid1-lvm"
    with open(os.path.join(server.remote_dir, node["uuid"], "input.json")) as f:
        sent = json.load(f)["instance_info"]
    meta = sent["configdrive"]["meta_data"]
    assert list(meta["public_keys"].values()) == [key.read_text().strip()]
    assert meta["hostname"] == "guide-metalsmith" and meta["uuid"] == node["uuid"]
    assert sent["configdrive"]["user_data"].startswith("#cloud-config\n")
    assert '"name": "ops"' in sent["configdrive"]["user_data"]
    assert "network_data" not in sent["configdrive"]   # metalsmith's needs Neutron ports
    guide.run("metalsmith-undeploy", env, cwd=tmp_path, timeout=300)
    node = server.node("guide-metalsmith")
    assert node["provision_state"] == "available" and node["instance_uuid"] is None
    assert server.get("/v1/allocations")["allocations"] == []
    # an allocated node's power actions, none of them reported to a Nova that is not there
    assert "send a power notification" not in server.log_text()


def test_the_network_data_of_a_boot_without_dhcp(server, ramdisk, tmp_path):
    """Section 9: the guide's network_data example, as Ironic's API takes it (its schema
    checks it); the libvirt lab boots a machine with one (tests/ironic/lab/test_vmedia.py)."""
    env = _enrolled(server, ramdisk, "guide-netdata", "52:54:00:12:34:56")
    with open(guide.DOC) as f:
        example = json.loads(re.search(r"`NETWORK_DATA` is the file.*?```json\n(.*?)```",
                                       f.read(), re.S).group(1))
    path = tmp_path / "network_data.json"
    path.write_text(json.dumps(example))
    env["NETWORK_DATA"] = str(path)
    guide.run("network-data", env)
    assert server.node("guide-netdata")["network_data"] == example
    # and what the ramdisk makes of it
    plan = netconfig.plan(example, {"52:54:00:12:34:56": "eth0"})
    assert [str(a) for a in plan.nics["eth0"].addresses] == ["192.0.2.100/24"]


def test_a_conductor_without_paramiko_names_the_extra(tmp_path):
    """The guide's install section: a conductor with the plain install (no [ironic] extra)
    cannot load the interface, and its log says what to install."""
    require(not realenv.missing_prerequisites(), f"missing: {realenv.missing_prerequisites()}")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['paramiko'] = None\n")
    server = realenv.Ironic(str(tmp_path), {"ssh_private_key_file": "/nonexistent"})
    server.launch(env=dict(os.environ, PYTHONPATH=str(site)))
    try:
        line = realenv.wait_for(lambda: next(
            (x for x in _lines(server) if "DriverLoadError: " in x), None), 90,
            what="the conductor's driver load error")
    finally:
        server.stop()
    assert "interface provision could not be loaded" in line, line
    assert "pip install 'provision-agent[ironic]'" in line, line


def _lines(server):
    with open(os.path.join(server.dir, "ironic.out")) as out:
        text = out.read()
    if os.path.exists(server.log_file):
        text += server.log_text()
    return text.splitlines()


def test_every_runnable_block_of_the_guide_was_run(request):
    selected = {i.name for i in request.session.items if i.module.__name__ == __name__}
    everything = {n for n in globals() if n.startswith("test_")}
    if selected != everything:
        pytest.skip("only meaningful when the whole module runs (tox -e ironic runs it all)")
    assert set(guide.blocks()) == guide.RAN, set(guide.blocks()) - guide.RAN
