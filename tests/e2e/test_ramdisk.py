"""The ramdisk boots, SSH works with a pinned host key, and the tools provision needs are there."""

import hashlib


def test_provision_and_storage_tools_present(shared_vm):
    assert shared_vm.ssh("provision --help").stdout.startswith("usage: provision")
    tools = ["mdadm", "lvm", "sgdisk", "sfdisk", "parted", "mkfs.ext4", "mkfs.xfs", "mkfs.vfat",
             "mkfs.btrfs", "qemu-img", "grub-install", "efibootmgr", "xorriso", "wipefs",
             "cryptsetup", "clevis", "clevis-encrypt-tpm2", "clevis-encrypt-tang", "age",
             "nvme", "hdparm"]
    found = shared_vm.ssh("for t in " + " ".join(tools) + "; do command -v $t || true; done")
    assert [p.rsplit("/", 1)[-1] for p in found.stdout.split()] == tools
    assert "Personalities" in shared_vm.mdstat()
    # dm is loaded: LVM will be able to activate volumes
    assert "device-mapper" in shared_vm.ssh("cat /proc/misc").stdout


def test_python_dependencies_import(shared_vm):
    mods = "oslo_config stevedore pyudev requests jsonschema tenacity zstandard ironic_lib"
    shared_vm.ssh(f"python3 -c 'import {mods.replace(' ', ',')}'")
    shared_vm.ssh("python3 -c 'import provision_agent.cli.main'")
    # gzip images inflate through zlib-ng (a PyPI wheel in the project layer), not zlib.
    backend = shared_vm.ssh(["python3", "-c", "from provision_agent.drivers.images import "
                             "decompressors; print(decompressors.gzip_backend().__name__)"])
    assert backend.stdout.strip() == "zlib_ng.zlib_ng"


def test_sshd_is_key_only(shared_vm):
    config = shared_vm.ssh("sshd -T").stdout.splitlines()
    assert "permitrootlogin without-password" in config
    assert "passwordauthentication no" in config


def test_guest_reaches_host_over_user_network(shared_vm, tmp_path):
    from tests.vmbench import FileServer
    (tmp_path / "hello.txt").write_text("hello from the host\n")
    with FileServer(tmp_path) as srv:
        got = shared_vm.ssh(["python3", "-c",
                             f"import urllib.request; print(urllib.request.urlopen("
                             f"'{srv.guest_url('hello.txt')}', timeout=30).read().decode())"])
    assert got.stdout.strip() == "hello from the host"
    assert "/hello.txt" in srv.requested


def test_manifest_matches_artefacts(ramdisk):
    manifest = ramdisk.manifest
    for name, path in (("vmlinuz", ramdisk.kernel), ("initramfs", ramdisk.initramfs)):
        entry = manifest["artefacts"][name]
        assert entry["bytes"] == path.stat().st_size
        assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    # 100 MiB until 2026-11-28; every Ethernet driver (~8 MB) and the firmware they name
    # (~7 MB) took it to 114.8 MiB: a server whose NIC the ramdisk cannot drive never
    # heartbeats, which costs more than the seconds the larger initramfs adds to a PXE load.
    assert manifest["artefacts"]["initramfs"]["bytes"] <= 120 * (1 << 20)
    for pkg in ("python3", "mdadm", "lvm2", "openssh-server", "qemu-utils", "grub-pc-bin", "sqv",
                "cryptsetup-bin", "clevis-luks", "clevis-tpm2", "age"):
        assert pkg in manifest["packages"], pkg
