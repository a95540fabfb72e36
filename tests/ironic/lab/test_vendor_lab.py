"""The example vendor package's clean step on a real ramdisk through a real Ironic (issue 59):
`tox -e ironic-lab -- -k vendor`; not in CI.

Our ramdisk built with examples/vendor-plugin as a wheel and its acme-fwcli as a file
(build.sh --extra-wheel/--extra-file, docs/extending.md), one BIOS libvirt machine powered by
sushy-tools' Redfish emulator and network-booted by iPXE, Ironic 39 with
[provision_agent]ramdisk_steps and fast track on the node (so that the ramdisk the cleaning ran
in is still up afterwards and ACME's CLI's record in its /run can be read over SSH):

  1. a manual cleaning with deploy.acme_apply_settings and its settings: the ramdisk lists its
     steps (`provision steps`, kept in the node as Ironic shows them), Ironic's own manual
     cleaning code checks the request against them, the step runs there (`provision step`)
     and the CLI's record read back from the ramdisk is the settings asked for;
  2. in the same ramdisk, the step with a setting its schema refuses: the cleaning fails
     naming the argument, and the CLI's record is unchanged;
  3. in a fresh ramdisk, a step it does not offer and the step without its required argument:
     Ironic refuses both from the ramdisk's listing (names, argsinfo) before any step runs.

The same flow against a stand-in ramdisk: tests/ironic/integration/test_vendor_steps.py.
"""

import shutil
import subprocess
import sys
import time

import pytest

from tests.ironic.conftest import require
from tests.ironic.lab import env as lablib
from tests.vmbench.ramdisk import REPO_ROOT, client_key, ensure_ramdisk
from tests.vmbench.ssh import SSH

EXAMPLE = REPO_ROOT / "examples" / "vendor-plugin"
TOOL = "/usr/local/sbin/acme-fwcli"
RECORD = "/run/acme-fwcli.settings"     # where acme-fwcli records what it set
STEP = "acme_apply_settings"
SETTINGS = {"BootMode": "Uefi", "SriovEnable": "Enabled"}
TIMEOUT = 900
READY = "PROVISION-RAMDISK READY"
TIMES = {}


def _vendor_ramdisk(build):
    """The ramdisk with the example's wheel (built from a copy: a build in place leaves an
    egg-info in examples/ that the unit tests would read) and its CLI."""
    source = build / "acme-provision"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(build / "dist"), str(source)],
                   check=True, timeout=300)
    wheel = next((build / "dist").glob("acme_provision-*.whl"))
    return ensure_ramdisk(extra=["--extra-wheel", str(wheel),
                                 "--extra-file", f"{EXAMPLE / 'acme-fwcli'}:{TOOL}"],
                          out=build / "ramdisk")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require(not lablib.missing(), f"missing: {lablib.missing()}")
    build = tmp_path_factory.mktemp("vendor-lab")
    ramdisk = _vendor_ramdisk(build)
    serve = build / "serve"         # no image: nothing here is deployed
    serve.mkdir()
    opts = dict(lablib.provision_opts(TIMEOUT), ramdisk_steps="true")
    with lablib.Lab(lablib.workdir(), ramdisk, {"acme": "bios"}, opts, serve_dir=serve,
                    disks=1) as the_lab:
        yield the_lab
    lablib.report_times("vendor-steps", TIMES)


@pytest.fixture(scope="module")
def node(lab):
    uuid = lab.enroll("acme", first_cleaning=False)
    lab.ironic.request("PATCH", f"/v1/nodes/{uuid}", [
        {"op": "add", "path": "/driver_info/fast_track", "value": "true"}])
    lab.ironic.set_state(uuid, "manage")
    lablib.wait_state(lab.ironic, uuid, ["manageable"], 60)
    return uuid


def _clean(lab, uuid, steps, what):
    t = time.monotonic()
    lab.ironic.request("PUT", f"/v1/nodes/{uuid}/states/provision",
                       {"target": "clean", "clean_steps": steps})
    node = lab.ironic.wait_state(uuid, ["manageable", "clean failed"], TIMEOUT)
    TIMES[what] = time.monotonic() - t
    return node


def _ramdisk_ssh(lab, node, directory):
    """SSH to the ramdisk at the address and host key its heartbeats reported."""
    dii = node["driver_internal_info"]
    host = dii["provision_ssh_address"]
    assert host == lab.net.leased_address(lab.domains["acme"].mac), dii
    known = directory / "known_hosts"
    known.write_text(f"{host} {' '.join(dii['provision_host_key'].split()[:2])}\n")
    return SSH(22, client_key(), known, host=host)


def _step_events(node):
    return [(e["kind"], e["status"]) for e in node["driver_internal_info"]["provision_events"]
            if e.get("event") == "step"]


def test_the_vendor_clean_step_runs_in_the_ramdisk_and_a_bad_argument_is_named(
        lab, node, tmp_path):
    dom = lab.domains["acme"]
    console = len(dom.console_text())
    done = _clean(lab, node, [{"interface": "deploy", "step": STEP,
                               "args": {"settings": SETTINGS}}], "cleaning with the step")
    assert done["provision_state"] == "manageable", done["last_error"]
    dii = done["driver_internal_info"]
    # what the booted ramdisk offers, kept in the node as Ironic shows it
    offered = dii["provision_ramdisk_steps"]
    assert [(s["step"], s["interface"], s["priority"]) for s in offered["clean"]] == [
        (STEP, "deploy", 0)], offered
    assert offered["clean"][0]["argsinfo"]["settings"]["required"] is True
    assert offered["clean"][0]["description"] == \
        "Apply ACME firmware settings with acme-fwcli"
    assert dii["provision_exit_code"] == 0
    assert _step_events(done) == [(STEP, "start"), (STEP, "done")], dii["provision_events"]
    assert dom.console_text()[console:].count(READY) == 1     # one boot of the ramdisk
    assert f"Node {node}: its ramdisk offers 1 vendor clean step(s)" in lab.ironic.log_text()
    # fast track left it running: ACME's CLI recorded the settings there
    assert dom.state() == "running"
    ssh = _ramdisk_ssh(lab, done, tmp_path)
    assert ssh.run(["cat", RECORD]).stdout == "BootMode=Uefi\nSriovEnable=Enabled\n"
    listed = ssh.run(["provision", "steps"]).stdout
    assert f'"step": "{STEP}"' in listed, listed

    # the same ramdisk (fast track), a setting the step's schema refuses
    console = len(dom.console_text())
    failed = _clean(lab, node, [{"interface": "deploy", "step": STEP,
                                 "args": {"settings": {"9lives": "x"}}}], "a bad argument")
    assert failed["provision_state"] == "clean failed"
    assert f"provision step {STEP} exited with 2" in failed["last_error"], failed["last_error"]
    assert "$.args.settings" in failed["last_error"], failed["last_error"]
    assert "9lives" in failed["last_error"], failed["last_error"]
    assert dom.console_text()[console:].count(READY) == 0     # no power cycle
    assert dom.state() == "running"
    assert ssh.run(["cat", RECORD]).stdout == "BootMode=Uefi\nSriovEnable=Enabled\n"


def test_ironic_checks_the_request_against_the_ramdisks_listing(lab, node):
    """After the failure (its agent token wiped) a fresh ramdisk lists the steps; Ironic's
    set_node_cleaning_steps refuses a step it does not offer and the step without the
    argument its argsinfo requires, before any step runs."""
    ironic, dom = lab.ironic, lab.domains["acme"]
    ironic.request("DELETE", f"/v1/nodes/{node}/maintenance")
    ironic.set_state(node, "manage")
    lablib.wait_state(ironic, node, ["manageable"], 60)
    console = len(dom.console_text())
    failed = _clean(lab, node, [{"interface": "deploy", "step": "acme_no_such"},
                                {"interface": "deploy", "step": STEP}],
                    "a cleaning Ironic refuses")
    assert failed["provision_state"] == "clean failed"
    error = failed["last_error"]
    assert "the clean steps asked for cannot run on this node" in error, error
    assert "node does not support this clean step" in error and "acme_no_such" in error, error
    assert "missing these required arguments: settings" in error, error
    assert f"(its ramdisk offers {STEP})" in error, error
    assert dom.console_text()[console:].count(READY) == 1
    assert _step_events(failed) == [], failed["driver_internal_info"]["provision_events"]
