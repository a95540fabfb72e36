"""Fixtures for end-to-end tests: the ramdisk, shared and fresh VMs, failure reports, timings.

Every test under tests/e2e is marked `e2e`. Missing prerequisites (root, qemu, mmdebstrap) skip
the suite locally and fail it in CI (CI=true): a skip must never pass for a green run there.
"""

import json
import os
import shutil
import time

import pytest

from tests.vmbench import VM, ensure_ramdisk
from tests.vmbench.ramdisk import REPO_ROOT

E2E_DIR = os.path.dirname(os.path.abspath(__file__))
TIMINGS = []


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: boots the ramdisk in qemu (slow; tox -e e2e)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.fspath).startswith(E2E_DIR):
            item.add_marker(pytest.mark.e2e)


def _missing_prerequisites():
    missing = []
    if os.geteuid() != 0:
        missing.append("root (the ramdisk build runs mmdebstrap --mode=root)")
    for tool in ("qemu-system-x86_64", "mmdebstrap", "cpio", "zstd", "ssh", "sfdisk", "sgdisk"):
        if not shutil.which(tool):
            missing.append(tool)
    return missing


@pytest.fixture(scope="session")
def ramdisk():
    missing = _missing_prerequisites()
    if missing:
        msg = "e2e prerequisites missing: " + ", ".join(missing) + " (run scripts/host-packages.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    start = time.monotonic()
    rd = ensure_ramdisk()
    manifest = rd.manifest
    TIMINGS.append(("ramdisk build/reuse", round(time.monotonic() - start, 1),
                    f"base {manifest['layers']['base']['state']}, "
                    f"project {manifest['layers']['project']['state']}, initramfs "
                    f"{manifest['artefacts']['initramfs']['bytes'] / (1 << 20):.1f} MiB"))
    return rd


def _booted(vm):
    TIMINGS.append((f"boot to SSH: {vm.name}", vm.boot_seconds, f"{len(vm.disks)} {vm.bus} disks"))
    return vm


@pytest.fixture(scope="session")
def shared_vm(ramdisk):
    """One VM for the whole session (3 x 4 GiB virtio disks, serials PA-DISK0..2) for tests that
    only read or that clean up after themselves; a boot costs ~20 s under TCG."""
    with VM(disks=3, disk_size="4G", name="shared", ramdisk=ramdisk) as vm:
        yield _booted(vm)


@pytest.fixture
def make_vm(ramdisk, request):
    """Factory for fresh VMs with their own disks: make_vm(disks=2, disk_size="8G", ...).

    Each is entered now and closed (powered off, images removed) when the test ends.
    """
    made = []

    def factory(**kwargs):
        kwargs.setdefault("name", request.node.name.replace("/", "_")[:60])
        kwargs.setdefault("ramdisk", ramdisk)
        vm = VM(**kwargs)
        made.append(vm)
        vm.__enter__()
        return _booted(vm)

    request.node.vmbench_vms = made
    yield factory
    for vm in made:
        vm.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        TIMINGS.append((f"test: {item.nodeid}", round(rep.duration, 1), rep.outcome))
    if not rep.failed:
        return
    vms = list(getattr(item, "vmbench_vms", []))
    vms += [v for v in getattr(item, "funcargs", {}).values() if isinstance(v, VM)]
    for vm in vms:
        rep.sections.append((f"vmbench {vm.name}", vm.failure_report()))


def pytest_terminal_summary(terminalreporter):
    if not TIMINGS:
        return
    terminalreporter.section("vmbench timings (seconds)")
    for what, seconds, note in TIMINGS:
        terminalreporter.write_line(f"{seconds!s:>7}  {what}  ({note})")
    out = REPO_ROOT / "artifacts" / "vmbench"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "timings.jsonl", "a") as f:
        for what, seconds, note in TIMINGS:
            f.write(json.dumps({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                "what": what, "seconds": seconds, "note": note}) + "\n")
