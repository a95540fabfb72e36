"""A vendor's plug-in and tool built into the ramdisk by build.sh --extra-wheel/--extra-file
(issue 59, docs/extending.md): both in the artefact, the tool with its mode, both named with
their sha256 in the manifest; booted, provision plans the plug-in's step before the wipe and
runs the vendor's tool from it."""

import hashlib
import json
import stat
import subprocess
import sys

import pytest

from tests.vmbench import VM
from tests.vmbench.ramdisk import REPO_ROOT, ensure_ramdisk

EXAMPLE = REPO_ROOT / "examples" / "vendor-plugin"
TOOL = "/usr/local/sbin/acme-fwcli"


@pytest.fixture(scope="module")
def vendor(tmp_path_factory):
    work = tmp_path_factory.mktemp("vendor")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(work / "dist"), str(EXAMPLE)],
                   check=True, timeout=300)
    wheel = next((work / "dist").glob("acme_provision-*.whl"))
    ramdisk = ensure_ramdisk(extra=["--extra-wheel", str(wheel),
                                    "--extra-file", f"{EXAMPLE / 'acme-fwcli'}:{TOOL}"],
                             out=work / "ramdisk")
    return ramdisk, wheel


def listing(ramdisk):
    """{path: mode} of every archive in the initramfs: `cpio -t` stops at the base layer's
    trailer, and the kernel (like this) reads on into the project layer appended after it."""
    data = subprocess.run(["zstd", "-dc", str(ramdisk.initramfs)], capture_output=True,
                          check=True, timeout=300).stdout
    got, at = {}, 0
    while (at := data.find(b"070701", at)) >= 0:
        head = data[at:at + 110]
        mode, size, namesize = (int(head[o:o + 8], 16) for o in (14, 54, 94))
        name = data[at + 110:at + 110 + namesize - 1].decode()
        at = (at + 110 + namesize + 3) & ~3
        at = (at + size + 3) & ~3
        if name != "TRAILER!!!":
            got[name.removeprefix("./")] = stat.filemode(mode)
    return got


def test_the_wheel_and_the_tool_are_in_the_artefact_and_the_manifest(vendor):
    ramdisk, wheel = vendor
    paths = listing(ramdisk)
    site = "usr/lib/python3/dist-packages"
    assert f"{site}/acme_provision/firmware.py" in paths
    assert f"{site}/acme_provision-1.0.dist-info/entry_points.txt" in paths
    assert paths[TOOL.lstrip("/")] == "-rwxr-xr-x"
    extras = ramdisk.manifest["extras"]
    assert extras["wheels"] == [{"name": wheel.name,
                                 "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}]
    assert extras["files"] == [{"name": "acme-fwcli", "path": TOOL, "sha256": hashlib.sha256(
        (EXAMPLE / "acme-fwcli").read_bytes()).hexdigest()}]


def test_a_file_over_the_ramdisks_own_is_refused_before_any_build(tmp_path):
    proc = subprocess.run(["bash", str(REPO_ROOT / "ramdisk" / "build.sh"), "--extra-file",
                           f"{EXAMPLE / 'acme-fwcli'}:/init", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "/init is the ramdisk's own; pick another path" in proc.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.vendor
def test_booted_provision_plans_and_runs_the_vendor_step_first(vendor):
    ramdisk, _ = vendor
    doc = json.loads((REPO_ROOT / "samples" / "single-disk.json").read_text())
    doc["extensions"] = {"acme_firmware": {"settings": {"SriovEnable": "Enabled",
                                                       "BootMode": "Uefi"}}}
    with VM(disks=1, disk_size="2G", name="vendor", ramdisk=ramdisk) as vm:
        dry = vm.provision(doc, ["--dry-run"])
        assert dry.returncode == 0, dry.stderr[-2000:]
        plan = dry.stdout.lower()
        assert -1 < plan.index("acme firmware: bootmode = uefi") < plan.index("wipe"), dry.stdout
        run = vm.provision(doc, ["--debug"])
        assert run.returncode == 0, f"{run.stderr[-2000:]}\n{run.log[-3000:]}"
        assert vm.read_text("/run/acme-fwcli.settings").split() == [
            "BootMode=Uefi", "SriovEnable=Enabled"]
        bad = json.loads(json.dumps(doc))
        bad["extensions"]["acme_firmware"]["settings"]["SriovEnable"] = "yes"
        run = vm.provision(bad)
        assert run.returncode == 2
        assert "settings.SriovEnable: ACME firmware takes Enabled or Disabled" in run.stderr


@pytest.mark.vendor
def test_a_package_from_the_mirror_and_a_local_deb_go_into_the_base(tmp_path):
    """--extra-package: a name from the mirror (jq) and a vendor's own .deb, with what they
    install, in a base layer of their own (minutes: outside CI)."""
    pkg = tmp_path / "acme-tools"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN" / "control").write_text(
        "Package: acme-tools\nVersion: 2.1\nArchitecture: all\n"
        "Maintainer: ACME <tools@example.com>\nDescription: ACME's RAID CLI (a test)\n")
    tool = pkg / "usr" / "sbin" / "acme-raidcli"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho acme-raidcli 2.1\n")
    tool.chmod(0o755)
    deb = tmp_path / "acme-tools_2.1_all.deb"
    subprocess.run(["dpkg-deb", "--build", str(pkg), str(deb)], check=True,
                   capture_output=True, timeout=60)
    ramdisk = ensure_ramdisk(extra=["--extra-package", "jq", "--extra-package", str(deb)],
                             out=tmp_path / "ramdisk")
    paths = listing(ramdisk)
    assert paths["usr/sbin/acme-raidcli"] == "-rwxr-xr-x"
    assert paths["usr/bin/jq"] == "-rwxr-xr-x"
    assert {"jq", "acme-tools"} <= set(ramdisk.manifest["packages"])
    assert ramdisk.manifest["extras"]["packages"] == [
        {"name": "jq"},
        {"name": deb.name, "sha256": hashlib.sha256(deb.read_bytes()).hexdigest()}]
