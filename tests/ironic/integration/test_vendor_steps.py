"""The example vendor package's Ironic clean step (examples/vendor-plugin, its hardware
plug-in `acme`) through a real Ironic with [provision_agent]ramdisk_steps: the cleaning lists
the stand-in ramdisk's steps (`provision steps`, kept in the node as Ironic's API shows it),
Ironic's own manual-cleaning code checks the step asked for against them, and the conductor
runs it there (`provision step`), which runs ACME's CLI: the settings it recorded are read
back. A bad argument fails the cleaning with the ramdisk's located error; an automated
cleaning lists the steps and erases as before.

Real: Ironic 39 (API + conductor), our provision-ironic-agent as a process, the conductor's
SSH (or registered commands: PROVISION_TEST_RAMDISK_COMMANDS=1) to a local sshd standing in for
the ramdisk, the example package's plug-in loaded there from its entry point, and the
example's acme-fwcli. The stand-in's `provision erase` only exits 0 (this host's disks)."""

import json
import os
import stat

import pytest

from tests import REPO_ROOT
from tests.ironic import realenv
from tests.ironic.integration.test_heartbeat import AgentProcess, _enroll

INVENTORY = os.path.join(REPO_ROOT, "samples", "inventory", "single-disk.json")
EXAMPLE = os.path.join(REPO_ROOT, "examples", "vendor-plugin")
STEP = "acme_apply_settings"


def _site(workdir):
    """The example package as pip installs it: its entry points in a dist-info."""
    dist = os.path.join(workdir, "site", "acme_provision-1.0.dist-info")
    os.makedirs(dist)
    with open(os.path.join(dist, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: acme-provision\nVersion: 1.0\n")
    with open(os.path.join(dist, "entry_points.txt"), "w") as f:
        f.write("[provision_agent.hardware]\nacme = acme_provision.hardware:AcmeHardware\n"
                "[provision_agent.step_kinds]\n"
                "acme_firmware = acme_provision.firmware:FirmwareSettings\n")
    return os.path.join(workdir, "site")


def _wrapper(workdir, state, site):
    """provision in the stand-in ramdisk: this tree's, with the example package installed and
    ACME's CLI on PATH; a run planned against the recorded inventory (--dry_run), an erase
    that only exits 0, `steps` and `step` for real."""
    path = os.path.join(workdir, "provision")
    env = {"PYTHONPATH": f"{site}:{EXAMPLE}:{REPO_ROOT}",
           "PATH": f"{EXAMPLE}:/usr/sbin:/usr/bin:/sbin:/bin", "ACME_FWCLI_STATE": state}
    with open(path, "w") as f:
        f.write(f"""#!/usr/bin/env python3
import os, sys
args = [a for a in sys.argv[1:] if a != "--dry_run" and not a.startswith("--inventory_file")]
if args[:1] == ["erase"]:
    sys.exit(0)
if args[:1] == ["steps"]:
    args += ["--inventory_file", {INVENTORY!r}]
elif args[:1] != ["step"]:
    args += ["--dry_run", "--inventory_file", {INVENTORY!r}]
os.environ.update({env!r})
os.execv({realenv.bin_path("provision")!r}, [{realenv.bin_path("provision")!r}] + args)
""")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture(scope="module")
def ironic(ramdisk, tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("ironic-vendor"))
    state = os.path.join(workdir, "acme-fwcli.settings")
    site = _site(workdir)
    wrapper = _wrapper(workdir, state, site)
    options = dict(realenv.dry_run_options(ramdisk, workdir, INVENTORY, provision=wrapper),
                   data_driver="native", running_poll_interval=600, provision_command=wrapper,
                   provision_extra_args="", ramdisk_steps="true")
    server = realenv.Ironic(workdir, options)
    server.remote_dir = os.path.join(workdir, "remote")
    server.acme_state = state
    # the conductor validates a template's plug-in section with the plug-in installed there too
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = ":".join(p for p in (site, EXAMPLE, before) if p)
    try:
        server.start()
    finally:
        os.environ.pop("PYTHONPATH") if before is None else os.environ.update(PYTHONPATH=before)
    yield server
    server.stop()


def _clean(ironic, uuid, steps):
    ironic.request("PUT", f"/v1/nodes/{uuid}/states/provision",
                   {"target": "clean", "clean_steps": steps})
    return ironic.wait_state(uuid, ["manageable", "clean failed"], 120)


def _recover(ironic, uuid):
    """Back to manageable after a failed cleaning (which Ironic puts in maintenance)."""
    ironic.request("DELETE", f"/v1/nodes/{uuid}/maintenance")
    ironic.set_state(uuid, "manage")
    ironic.wait_state(uuid, ["manageable"], 30)


def test_the_example_vendors_clean_step_is_listed_and_run_in_the_ramdisk(ironic, ramdisk,
                                                                          tmp_path):
    mac = "52:54:00:ac:00:01"
    uuid = _enroll(ironic, "vendor-clean", mac)
    ironic.set_state(uuid, "manage")
    ironic.wait_state(uuid, ["manageable"], 30)
    with AgentProcess(tmp_path, ironic.ramdisk_api_url, mac, ramdisk.port,
                      ramdisk.host_key_file + ".pub", ironic.binding_dir,
                      ironic.remote_dir) as agent:
        node = _clean(ironic, uuid, [{"interface": "deploy", "step": STEP, "args": {
            "settings": {"BootMode": "Uefi", "SriovEnable": "Enabled"}}}])
        assert node["provision_state"] == "manageable", (node["last_error"], agent.text())
        # what the ramdisk offers, kept in the node as Ironic shows it
        offered = node["driver_internal_info"]["provision_ramdisk_steps"]
        assert [(s["step"], s["interface"], s["priority"]) for s in offered["clean"]] == [
            (STEP, "deploy", 0)]
        assert offered["clean"][0]["argsinfo"]["settings"]["required"] is True
        with open(ironic.acme_state) as f:
            assert f.read() == "BootMode=Uefi\nSriovEnable=Enabled\n"

        node = _clean(ironic, uuid, [{"interface": "deploy", "step": STEP,
                                      "args": {"settings": {"9lives": "x"}}}])
        assert node["provision_state"] == "clean failed"
        assert "provision step acme_apply_settings exited with 2" in node["last_error"]
        assert "$.args.settings" in node["last_error"]

        _recover(ironic, uuid)
        node = _clean(ironic, uuid, [{"interface": "deploy", "step": "acme_no_such"}])
        assert node["provision_state"] == "clean failed"
        assert "its ramdisk offers acme_apply_settings" in node["last_error"]

        # automated cleaning: the listing, then the metadata erase, in the same ramdisk
        _recover(ironic, uuid)
        ironic.request("PATCH", f"/v1/nodes/{uuid}",
                       [{"op": "replace", "path": "/automated_clean", "value": True}])
        ironic.set_state(uuid, "provide")
        node = ironic.wait_state(uuid, ["available", "clean failed"], 120)
        assert node["provision_state"] == "available", (node["last_error"], agent.text())
    log = ironic.log_text()
    assert log.count(f"Node {uuid}: its ramdisk offers 1 vendor clean step(s)") >= 3
    with open(ironic.acme_state) as f:     # the refused arguments never reached the CLI
        assert f.read() == "BootMode=Uefi\nSriovEnable=Enabled\n"


FIRMWARE = {"acme_firmware": {"settings": {"BootMode": "Uefi", "SriovEnable": "Enabled"}}}


def _template(ironic, name, priority=150):
    """The template, once per Ironic (a test run alone makes the one it needs)."""
    resp = ironic.request("POST", "/v1/deploy_templates", {"name": name, "steps": [
        {"interface": "deploy", "step": "add_extensions", "priority": priority,
         "args": {"extensions": FIRMWARE}}]}, ok=False)
    assert resp.status_code in (201, 409), resp.text


def _traits(ironic, uuid, traits):
    ironic.request("PUT", f"/v1/nodes/{uuid}/traits", {"traits": traits})
    ironic.request("PATCH", f"/v1/nodes/{uuid}", [
        {"op": "add", "path": "/instance_info/traits", "value": traits}])


def test_a_deploy_templates_plugin_section_joins_the_nodes_layout(ironic, ramdisk, tmp_path):
    mac = "52:54:00:ac:00:02"
    uuid = _enroll(ironic, "vendor-fragment", mac)
    _template(ironic, "CUSTOM_ACME")
    _traits(ironic, uuid, ["CUSTOM_ACME"])
    with AgentProcess(tmp_path, ironic.ramdisk_api_url, mac, ramdisk.port,
                      ramdisk.host_key_file + ".pub", ironic.binding_dir,
                      ironic.remote_dir) as agent:
        ironic.set_state(uuid, "active")
        node = ironic.wait_state(uuid, ["active", "deploy failed"], 120)
        assert node["provision_state"] == "active", (node["last_error"], agent.text())
    job = os.path.join(ironic.remote_dir, uuid)
    with open(os.path.join(job, "input.json")) as f:
        sent = json.load(f)
    # the node's own layout (samples/single-disk.json) with the template's section added
    assert sent["extensions"] == FIRMWARE and sent["disks"][0]["id"]
    with open(os.path.join(job, "output.log")) as f:
        plan = f.read()
    first = plan.index("ACME firmware: BootMode = Uefi")
    assert first < plan.index("ACME firmware: SriovEnable = Enabled") < plan.index("wipe")
    # the section never went into the node's record
    assert "SriovEnable" not in json.dumps(node["driver_internal_info"])


def test_two_templates_giving_one_plugins_section_are_refused_before_anything_boots(ironic):
    uuid = _enroll(ironic, "vendor-fragment-twice", "52:54:00:ac:00:03")
    _template(ironic, "CUSTOM_ACME")
    _template(ironic, "CUSTOM_ACME_TOO", priority=140)
    _traits(ironic, uuid, ["CUSTOM_ACME", "CUSTOM_ACME_TOO"])
    resp = ironic.set_state(uuid, "active", ok=False)
    assert resp.status_code == 400, resp.text
    assert "deploy template CUSTOM_ACME_TOO (step deploy.add_extensions): adds the plug-in " \
           "section 'acme_firmware', which deploy template CUSTOM_ACME" in resp.text
    assert ironic.node(uuid)["provision_state"] == "available"


def test_a_vendor_service_step_on_an_active_node(ironic, ramdisk, tmp_path):
    """Ironic's servicing: the active node powered into the ramdisk, its steps listed, the
    service step run there (ACME's CLI's record read back), the instance booted again."""
    mac = "52:54:00:ac:00:04"
    uuid = _enroll(ironic, "vendor-service", mac)
    with AgentProcess(tmp_path, ironic.ramdisk_api_url, mac, ramdisk.port,
                      ramdisk.host_key_file + ".pub", ironic.binding_dir,
                      ironic.remote_dir) as agent:
        ironic.set_state(uuid, "active")
        node = ironic.wait_state(uuid, ["active", "deploy failed"], 120)
        assert node["provision_state"] == "active", (node["last_error"], agent.text())
        log = len(ironic.log_text())
        ironic.request("PUT", f"/v1/nodes/{uuid}/states/provision", {
            "target": "service", "service_steps": [{"interface": "deploy", "step": STEP,
                                                    "args": {"settings": {"Vendor": "x"}}}]})
        node = ironic.wait_state(uuid, ["active", "service failed"], 120)
        assert node["provision_state"] == "active", (node["last_error"], agent.text())
    with open(ironic.acme_state) as f:
        assert f.read().splitlines()[-1] == "Vendor=x"
    after = ironic.log_text()[log:]
    assert f"Node {uuid}: its ramdisk offers 1 vendor service step(s)" in after
    # into the ramdisk and back to the instance: off, on (prepare_service), off, on (tear down)
    powered = [line.split(" power state to ", 1)[1].split(" by ")[0]
               for line in after.splitlines()
               if f"Successfully set node {uuid} power state to" in line]
    assert powered == ["power off", "power on", "power off", "power on"], powered
