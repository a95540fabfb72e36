"""Encryption at rest, proven in the VM bench (issue 32): provisioned in the ramdisk VM, then
the installed disks booted on their own, with the machine's TPM (swtpm: its state directory is
the chip) or a Tang server on the host.

- RAID1 + LUKS2 (TPM2) + LVM root (samples/encrypted-raid1-lvm.json) boots unattended; the
  same disks under a fresh TPM stop at the passphrase prompt and boot once the recovery key,
  decrypted with the operator's age identity, is typed there; `provision erase` (Ironic's
  cleaning) then leaves no LUKS header on either disk, read back from the host.
- A root unlocked by Tang boots while the server answers and does not while it is stopped.

About 18 minutes under TCG (two VMs side by side): `tox -e e2e-crypt`, outside CI (docs/testing.md).
"""

import json
import os
import re
import time

import pytest

from tests.vmbench import FileServer, agekeys, images, testos
from tests.vmbench.ramdisk import REPO_ROOT
from tests.vmbench.tang import TangServer
from tests.vmbench.tpm import SoftTPM

SAMPLES = REPO_ROOT / "samples"
MARKER = r"PROVISION-BOOT-OK cd=\S+ mpath=\S+ root=(\S+)"
RECOVERY = "/tmp/vmbench/recovery.json"
NO_UNLOCK_WAIT = 90      # seconds at the prompt with nothing typed: clevis retries every 5 s
TIMES = {}


@pytest.fixture(scope="module", autouse=True)
def report_times():
    """Provision and boot times with and without encryption, kept in the artefacts (each
    xdist worker writes the cases it ran)."""
    yield
    if not TIMES:
        return
    out = REPO_ROOT / "artifacts" / "vmbench"
    out.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (out / f"encryption-times-{worker}.json").write_text(
        json.dumps({k: round(v, 1) for k, v in TIMES.items()}, indent=1) + "\n")


@pytest.fixture(scope="module")
def crypt_os():
    return testos.build_dir("crypt")


@pytest.fixture(scope="module")
def age_key(tmp_path_factory):
    """(identity file, recipient): the operator's age key pair."""
    return agekeys.keypair(tmp_path_factory.mktemp("age"))


def _doc(sample, srv, crypt_os, recipient):
    doc = sample if isinstance(sample, dict) else json.loads((SAMPLES / sample).read_text())
    tar = crypt_os / "root.tar.zst"
    doc["images"] = [{"uri": srv.guest_url(tar.name), "format": "tar", "target": "/",
                      "checksum": testos.checksum(tar)}]
    doc["recovery"] = {"age_recipients": [recipient]}
    return doc


def _provision(make_vm, doc, disks, tpm=None, inspect=()):
    """Provision; returns (the VM, powered off, its disks kept until the test says otherwise;
    seconds; what each inspect command printed; the recovery file; provision's log and
    output)."""
    t0 = time.monotonic()
    vm = make_vm(disks=disks, disk_size="4G", keep_disks=True, tpm=tpm,
                 serials=[f"disk{i}" for i in range(disks)])
    run = vm.provision(doc, ["--debug", "--recovery_key_file", RECOVERY])
    assert run.returncode == 0, run.log
    seen = {c: vm.ssh(["sh", "-c", c]).stdout for c in inspect}
    recovery = json.loads(vm.ssh(["cat", RECOVERY]).stdout)
    vm.stop()
    return (vm, time.monotonic() - t0, seen, recovery, run.log + run.stdout + run.stderr)


def _boot(make_vm, disks, **kw):
    t0 = time.monotonic()
    vm = make_vm(disk_images=disks, boot="disk", **kw)
    return vm, t0


def _stays_locked(vm, prompt):
    """The boot reached the passphrase prompt and, with nothing typed, went no further."""
    vm.wait_console(prompt, timeout=1800)
    time.sleep(NO_UNLOCK_WAIT)
    text = vm.console_text()
    assert not re.search(MARKER, text), "the disks unlocked without their key"
    return text


def test_the_same_raid1_lvm_layout_unencrypted_the_boot_time_baseline(make_vm, crypt_os,
                                                                     age_key):
    """samples/encrypted-raid1-lvm.json without its encryption, the same test OS, the same
    VM: what encryption costs at provisioning and at boot is the difference."""
    _identity, recipient = age_key
    with FileServer(crypt_os) as srv:
        doc = _doc("encrypted-raid1-lvm.json", srv, crypt_os, recipient)
        del doc["encrypted"], doc["recovery"]
        doc["volume_groups"][0]["pvs"] = ["md-os"]
        t0 = time.monotonic()
        vm = make_vm(disks=2, disk_size="4G", keep_disks=True, serials=["disk0", "disk1"])
        run = vm.provision(doc, ["--debug"])
        assert run.returncode == 0, run.log
        vm.stop()
    TIMES["plain raid1 provision"] = time.monotonic() - t0
    booted, t0 = _boot(make_vm, list(vm.disk_images))
    root = booted.wait_console(MARKER, timeout=1800).group(1)
    TIMES["plain raid1 boot to marker"] = time.monotonic() - t0
    assert ":crypt" not in root and ":raid1" in root, root
    booted.stop()
    vm.keep_disks = False


def test_tpm2_raid1_lvm_root_boots_alone_not_with_another_tpm_and_erase_destroys_it(
        make_vm, crypt_os, age_key, tmp_path):
    identity, recipient = age_key
    tpm_state = tmp_path / "tpm"
    with FileServer(crypt_os) as srv:
        doc = _doc("encrypted-raid1-lvm.json", srv, crypt_os, recipient)
        prov, provision_s, seen, recovery, said = _provision(
            make_vm, doc, 2, tpm=SoftTPM(tpm_state),
            inspect=("cryptsetup status cryptos", "cryptsetup luksDump /dev/md/os",
                     "lsblk -o NAME,TYPE,FSTYPE"))
    TIMES["tpm2 raid1 provision"] = provision_s
    disks = list(prov.disk_images)
    assert "is active" in seen["cryptsetup status cryptos"]
    dump = seen["cryptsetup luksDump /dev/md/os"]
    # the recovery key's slot and clevis's: the key the volume was made with is destroyed
    assert len(re.findall(r"^\s+\d+: luks2$", dump, re.M)) == 2, dump
    assert re.search(r"^\s+\d+: clevis$", dump, re.M), dump
    assert [k["name"] for k in recovery] == ["cryptos"]
    phrase = agekeys.decrypt(identity, recovery[0]["age"])
    assert re.fullmatch(r"([cbdefghijklnrtuv]{8}-){7}[cbdefghijklnrtuv]{8}", phrase)
    assert phrase not in said and recovery[0]["age"] not in said

    vm, t0 = _boot(make_vm, disks, tpm=SoftTPM(tpm_state))
    root = vm.wait_console(MARKER, timeout=1800).group(1)
    TIMES["tpm2 raid1 boot to marker, its own TPM"] = time.monotonic() - t0
    assert "cryptos:crypt" in root and ":raid1" in root, root
    vm.stop()

    vm, t0 = _boot(make_vm, disks, tpm=SoftTPM(tmp_path / "another-tpm"), console_input=True)
    _stays_locked(vm, r"Please unlock disk cryptos")
    vm.type_console(phrase + "\r")
    root = vm.wait_console(MARKER, timeout=1800).group(1)
    TIMES["tpm2 raid1 boot, another TPM, recovery key typed"] = time.monotonic() - t0
    assert "cryptos:crypt" in root, root
    vm.stop()

    before = {d: images.luks_headers(d) for d in disks}
    for d, found in before.items():
        assert {m for _, m in found} == {"LUKS", "SKUL"}, (d, found)
    primary = before[disks[0]][0][0]
    assert images.luks_opens(disks[0], primary, phrase, tmp_path)
    cleaner = make_vm(disk_images=disks)
    erased = cleaner.provision(subcommand="erase")
    assert erased.returncode == 0, erased.log
    assert "destroying the keyslots of LUKS volume" in erased.log
    cleaner.stop()
    after = {d: images.luks_headers(d) for d in disks}
    assert after == {d: [] for d in disks}, after
    assert not images.luks_opens(disks[0], primary, phrase, tmp_path)
    prov.keep_disks = False     # proven: the fixture's teardown removes them now


def _tang_root(tang):
    """One disk: a plain /boot (grub reads it before anything is unlocked), and / on a LUKS2
    partition that the Tang server unlocks."""
    return {
        "version": 1,
        "disks": [{"id": "disk0", "match": {"name": "/dev/vda"}, "partitions": [
            {"id": "bios", "size": "1MiB", "type": "bios_grub"},
            {"id": "boot", "size": "512MiB", "type": "linux"},
            {"id": "root", "size": "remaining", "type": "linux"}]}],
        "encrypted": [{"id": "crypt-root", "device": "root", "name": "cryptroot",
                       "unlock": {"tang": [{"url": tang.guest_url,
                                            "thumbprint": tang.thumbprint}]}}],
        "filesystems": [{"device": "boot", "type": "ext2", "mount": "/boot"},
                        {"device": "crypt-root", "type": "ext4", "mount": "/"}],
        "bootloader": {"boot_mode": "bios", "kernel_params": "console=ttyS0"},
    }


def test_a_root_that_tang_unlocks_boots_while_tang_answers_and_not_when_it_is_stopped(
        make_vm, crypt_os, age_key, tmp_path):
    identity, recipient = age_key
    keys = tmp_path / "tang-keys"
    with FileServer(crypt_os) as srv, TangServer(keys) as tang:
        doc = _doc(_tang_root(tang), srv, crypt_os, recipient)
        prov, provision_s, _seen, recovery, _said = _provision(make_vm, doc, 1)
        disks = list(prov.disk_images)
        port = tang.port
        bound = tang.requests
    TIMES["tang provision"] = provision_s
    assert bound >= 1                       # clevis fetched the advertisement to bind

    vm, _t0 = _boot(make_vm, disks)
    text = _stays_locked(vm, r"Please unlock disk cryptroot")
    # the network was up: Tang's silence, not a missing network, kept the disk locked
    assert re.search(r"IP-Config: \S+ complete", text), text[-3000:]
    vm.stop()

    with TangServer(keys, port=port) as tang:
        vm, t0 = _boot(make_vm, disks)
        root = vm.wait_console(MARKER, timeout=1800).group(1)
        TIMES["tang boot to marker"] = time.monotonic() - t0
        assert tang.requests >= 1
    assert "cryptroot:crypt" in root, root
    assert "ip=::::::dhcp" in vm.console_text()
    vm.stop()
    prov.keep_disks = False
