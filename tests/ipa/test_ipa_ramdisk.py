"""The IPA ramdisk (ramdisk/build-ipa.sh) boots and finds Ironic: qemu start -> IPA's lookup ->
heartbeat, against a stand-in for Ironic's ramdisk API on the host; and our ramdisk's agent
booted the same way, so the two boot-to-lookup times come from one run.

Outside CI (a TCG boot each): `tox -e ipa`. No timed assertion: the seconds are printed and
appended to artifacts/vmbench/timings.jsonl.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.vmbench import VM
from tests.vmbench.ipa import IpaVM, RamdiskAPI
from tests.vmbench.ramdisk import REPO_ROOT, Ramdisk, build_key_args, cache_dir

QEMU_MAC = "52:54:00:12:34:56"    # qemu's address for the VM bench's one NIC
DISK = dict(disks=1, disk_size="4G")   # IPA wants a root disk of 4 GiB or more


def _record(name, vm, api, ramdisk):
    """Seconds from qemu start to each milestone, kept beside the console log and in
    artifacts/vmbench/timings.jsonl."""
    lookup = api.first("GET", "/v1/lookup")
    heartbeat = api.first("POST", "/v1/heartbeat/")
    row = {"what": f"boot to lookup: {name}",
           "seconds": round(lookup.at - vm._started, 1),
           "heartbeat_seconds": round(heartbeat.at - vm._started, 1) if heartbeat else None,
           "initramfs_mib": round(ramdisk.initramfs.stat().st_size / (1 << 20), 1),
           "load": os.getloadavg()[0], "cpus": vm.cpus, "memory": vm.memory,
           "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print(f"{name}: lookup {row['seconds']} s, heartbeat {row['heartbeat_seconds']} s after qemu "
          f"start; initramfs {row['initramfs_mib']} MiB; load {row['load']:.1f}")
    (vm.artifacts / "boot-to-lookup.json").write_text(json.dumps(row, indent=1))
    out = REPO_ROOT / "artifacts" / "vmbench"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "timings.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    return row


def test_ipa_ramdisk_looks_up_and_heartbeats(ipa_ramdisk):
    with RamdiskAPI() as api, IpaVM(ipa_ramdisk, api.guest_url, **DISK) as vm:
        try:
            lookup = api.wait_for("GET", "/v1/lookup", vm, timeout=600)
            heartbeat = api.wait_for("POST", f"/v1/heartbeat/{api.node_uuid}", vm, timeout=300)
        except BaseException:
            vm.report_failure()
            raise
        _record("ipa", vm, api, ipa_ramdisk)

    assert lookup.query["addresses"][0].split(",") == [QEMU_MAC], lookup.query
    assert lookup.headers.get("X-OpenStack-Ironic-API-Version")
    # IPA took the token handed out at lookup and reports where its API listens (auto TLS,
    # as Ironic >= 1.68 asks for).
    body = heartbeat.body
    assert body["agent_token"] == api.token
    assert body["agent_version"] == "13.0.0"
    assert body["callback_url"] in ("http://10.0.2.15:9999", "https://10.0.2.15:9999")
    if body["callback_url"].startswith("https"):
        assert body["agent_verify_ca"].startswith("-----BEGIN CERTIFICATE-----")
    assert "Started API service" in vm.console_text()


def test_ipa_ramdisk_manifest(ipa_ramdisk):
    manifest = ipa_ramdisk.manifest
    assert manifest["ironic_python_agent"] == "13.0.0"
    assert manifest["artefacts"]["initramfs"]["bytes"] == ipa_ramdisk.initramfs.stat().st_size
    for pkg in ("python3", "qemu-utils", "parted", "gdisk", "mdadm", "lshw", "dmidecode",
                "efibootmgr", "file", "hdparm"):
        assert pkg in manifest["packages"], pkg


@pytest.fixture(scope="module")
def our_ramdisk():
    """Ours, built from this tree into a directory of its own: `current` belongs to whoever
    else is running the e2e suite on this machine."""
    prebuilt = os.environ.get("PROVISION_RAMDISK_DIR")
    if prebuilt:
        return Ramdisk(Path(prebuilt))
    out = cache_dir() / "ipa-ramdisk" / "ours"
    # booted with ipa-api-url, it authorizes only the keys built in (sshkey= is ignored)
    subprocess.run(["bash", str(REPO_ROOT / "ramdisk" / "build.sh"), *build_key_args(),
                    "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    return Ramdisk(out)


def test_our_ramdisk_looks_up_the_same_way(our_ramdisk):
    """The other side of the comparison: our agent's lookup from the same qemu machine."""
    with RamdiskAPI() as api, VM(ramdisk=our_ramdisk, name="ours-lookup",
                                 append=f"ipa-api-url={api.guest_url}", **DISK) as vm:
        lookup = api.wait_for("GET", "/v1/lookup", vm, timeout=600)
        api.wait_for("POST", f"/v1/heartbeat/{api.node_uuid}", vm, timeout=300)
        _record("ours", vm, api, our_ramdisk)
    assert QEMU_MAC in lookup.query["addresses"][0].split(",")
