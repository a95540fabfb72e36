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
RUN_STARTED = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _timed(what, seconds, note):
    """Keep one timing for the summary and append it to artifacts/vmbench/timings.jsonl at
    once: a run stopped by CI's time limit prints no summary, and its times are what show
    where the time went. `run` tells one run's lines from another's; xdist workers get the
    controller's through the environment (pytest_configure)."""
    TIMINGS.append((what, seconds, note))
    out = REPO_ROOT / "artifacts" / "vmbench"
    out.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "run": os.environ.get("VMBENCH_RUN_STARTED", RUN_STARTED),
                       "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                       "what": what, "seconds": seconds, "note": note})
    with open(out / "timings.jsonl", "a") as f:
        f.write(line + "\n")


# With two workers (tox -e e2e) the tests go out longest first, so neither worker is left with a
# long test at the end: each worker holds its running test and one more (xdist needs the next
# test to run one), so the order is what each is handed next. A module's tests stay on one worker
# in file order (test_layouts' tests build on each other), except the boot proofs, which are
# independent and the longest. Seconds, with the VMs they boot: the cold CI-style run of
# 2026-11-28 (qemu64, two VMs side by side); the ESP copy case as measured alone since it
# writes an ext4 image and keeps its initramfs (it was 577 s with a tar image's rebuild).
LONGEST_FIRST = (
    "test_multipath.py",                                          # 680
    "test_fuel_sample.py",                                        # 483
    "test_layouts.py",                                            # 400
    "test_boot.py::test_uefi_esp_on_md_raid1_",                   # 291
    "test_boot.py::test_bios_raid1_",                             # 284 with its provision
    "test_boot.py::test_uefi_esp_copy_",                          # 194 alone
    "test_images.py",                                             # 195
    "test_boot.py::test_uefi_ironic_partition_image_",            # 183
)
APART = ("test_boot.py", "test_encryption.py", "test_secure_boot.py")
# The modules on the session's shared VM go to one worker together: it boots once, not once
# per worker that got one of them (two boots of 35-45 s on the 2-core host, for 40 s of tests).
ON_SHARED_VM = ("test_ramdisk.py", "test_input_url.py", "test_inventory.py")


def _rank(nodeid):
    name = nodeid.rsplit("/", 1)[-1]
    return next((i for i, prefix in enumerate(LONGEST_FIRST) if name.startswith(prefix)),
                len(LONGEST_FIRST))


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: boots the ramdisk in qemu (slow; tox -e e2e)")
    os.environ.setdefault("VMBENCH_RUN_STARTED", RUN_STARTED)     # before xdist starts workers
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        # Measured on the 2-core host: a 2-vCPU TCG guest running exec-heavy work (what
        # update-initramfs is) keeps both host cores busy and goes no faster than with one vCPU
        # (600 execs 27.5 vs 28.3 s), so two such VMs side by side took twice as long each
        # (53 s); two 1-vCPU VMs side by side took 29 s each.
        os.environ.setdefault("VMBENCH_CPUS", "1")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.fspath).startswith(E2E_DIR):
            item.add_marker(pytest.mark.e2e)
    items.sort(key=lambda item: _rank(item.nodeid))     # stable: file order otherwise


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """A file's tests go to one worker (as --dist loadfile), a test_boot.py test on its own."""
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            name = os.path.basename(path)
            if name in ON_SHARED_VM:
                return "shared_vm"
            return nodeid if name in APART else path

    return Scheduling(config, log)


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
    _timed("ramdisk build/reuse", round(time.monotonic() - start, 1),
           f"base {manifest['layers']['base']['state']}, "
           f"project {manifest['layers']['project']['state']}, initramfs "
           f"{manifest['artefacts']['initramfs']['bytes'] / (1 << 20):.1f} MiB")
    return rd


def _booted(vm):
    _timed(f"boot to SSH: {vm.name}", vm.boot_seconds, f"{len(vm.disks)} {vm.bus} disks")
    return vm


@pytest.fixture(scope="session")
def shared_vm(ramdisk):
    """One VM for the whole session (virtio disks of 4, 6 and 8 GiB, serials SER-A4, SER-B6,
    SER-C8: test_inventory reads them back) for tests that only read or that clean up after
    themselves; a boot costs 35-45 s under TCG."""
    with VM(disks=["4G", "6G", "8G"], serials=["SER-A4", "SER-B6", "SER-C8"], name="shared",
            ramdisk=ramdisk) as vm:
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
        _timed(f"test: {item.nodeid}", round(rep.duration, 1), rep.outcome)
    if not rep.failed:
        return
    vms = list(getattr(item, "vmbench_vms", []))
    vms += [v for v in getattr(item, "funcargs", {}).values() if isinstance(v, VM)]
    for vm in vms:
        rep.sections.append((f"vmbench {vm.name}", vm.failure_report()))


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:      # an xdist worker: the controller prints them
        workeroutput["vmbench_timings"] = [list(t) for t in TIMINGS]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    TIMINGS.extend(tuple(t) for t in getattr(node, "workeroutput", {}).get("vmbench_timings", []))


def pytest_terminal_summary(terminalreporter):
    if not TIMINGS:
        return
    terminalreporter.section("vmbench timings (seconds)")
    for what, seconds, note in TIMINGS:
        terminalreporter.write_line(f"{seconds!s:>7}  {what}  ({note})")
