"""The ramdisk boots, SSH works with a pinned host key, and the tools provision needs are there."""

import hashlib


def test_provision_and_storage_tools_present(shared_vm):
    assert shared_vm.ssh("provision --help").stdout.startswith("usage: provision")
    tools = ["mdadm", "lvm", "sgdisk", "sfdisk", "parted", "mkfs.ext4", "mkfs.xfs", "mkfs.vfat",
             "mkfs.btrfs", "qemu-img", "grub-install", "efibootmgr", "xorriso", "wipefs",
             "cryptsetup", "clevis", "clevis-encrypt-tpm2", "clevis-encrypt-tang", "age",
             "nvme", "hdparm", "mkfs.jfs", "mkfs.ntfs", "mkfs.reiserfs"]
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
                "cryptsetup-bin", "clevis-luks", "clevis-tpm2", "age", "jfsutils", "ntfs-3g",
                "reiserfsprogs", "bcache-tools"):
        assert pkg in manifest["packages"], pkg


def test_jfs_ntfs_and_reiserfs_are_made_and_jfs_and_reiserfs_mounted(ramdisk):
    """The base layer (the initramfs's first archive) holds their mkfs and the modules that
    mount jfs and reiserfs, with the aliases mount's module request finds; not their fsck or
    FUSE tools (path-excluded in build-base.sh)."""
    names = {name.rsplit("/", 1)[-1] for name in ramdisk.base_paths()}
    assert {"mkfs.jfs", "mkfs.ntfs", "mkntfs", "mkfs.reiserfs", "mkreiserfs", "jfs.ko",
            "reiserfs.ko"} <= names
    assert not names & {"jfs_fsck", "reiserfsck", "ntfsclone", "lowntfs-3g"}


def test_bcache_tools_udev_rule_and_module_are_in_the_initramfs(ramdisk):
    """make-bcache, the udev rule that registers old bcache devices (so that a wipe stops
    them) and the kernel module (issue 56)."""
    names = ramdisk.base_paths()
    kver = ramdisk.manifest["kernel"]
    for name in ("usr/sbin/make-bcache", "usr/lib/udev/rules.d/69-bcache.rules",
                 "usr/lib/udev/bcache-register",
                 f"usr/lib/modules/{kver}/kernel/drivers/md/bcache/bcache.ko"):
        assert name in names, name


# As root in a chroot: chroot into a subdirectory while the working directory stays outside
# it, climb `..` from there, and chroot where the climb ends (tests/functional's, in python:
# the target here is the ramdisk's own /usr, which has it).
ESCAPE = r"""
import os, sys
job = sys.argv[1]
os.makedirs("/run/esc", exist_ok=True)
os.chroot("/run/esc")
for _ in range(64):
    os.chdir("..")
os.chroot(".")
os.chdir("/")
try:
    with open(job + "/input.json") as f:
        seen = f.read().strip()
except OSError:
    seen = "absent"
try:
    with open(job + "/exit_code", "w") as f:
        f.write("0\n")
    wrote = "yes"
except OSError:
    wrote = "no"
print("input=" + seen)
print("wrote=" + wrote)
print("top=" + " ".join(sorted(os.listdir("/"))))
"""
DRIVE = """
import sys
from provision_agent.drivers import chroot
from provision_agent.run.runner import Runner
root, job, escape = sys.argv[1:]
with chroot.bound(Runner(), root) as ch:
    print(ch.run(["python3", "-c", escape, job], timeout=300).stdout)
"""


def _seen(out):
    return dict(line.split("=", 1) for line in out.strip().splitlines() if "=" in line)


def test_a_command_that_leaves_the_chroot_finds_only_the_target(shared_vm):
    """Issue 52 item 16, in the ramdisk, whose / is the initramfs itself (rootfs): there
    pivot_root is refused, and a plain chroot (the control) lets the climb reach the job's
    input and exit code; the chroot helper's commands find only the target."""
    vm = shared_vm
    job = "/run/provision-ironic/escape-node"
    root = "/tmp/escape/root"
    vm.ssh(f"mkdir -p {job} {root}/usr {root}/run {root}/proc && "
           f"echo '{{\"pull_secret\": \"OPS\"}}' > {job}/input.json && "
           f"echo CONDUCTOR-READS-THIS > {job}/exit_code && "
           f"for d in bin lib lib64 sbin; do [ -L /$d ] && ln -sfn \"$(readlink /$d)\" "
           f"{root}/$d; done; mount --bind -o ro /usr {root}/usr")
    try:
        refused = vm.ssh("unshare --mount sh -c 'mkdir -p /tmp/pr && mount -t tmpfs t /tmp/pr "
                         "&& mkdir /tmp/pr/old && pivot_root /tmp/pr /tmp/pr/old'", check=False)
        assert refused.returncode != 0 and "Invalid argument" in refused.stderr, refused
        control = _seen(vm.ssh(["unshare", "--pid", "--fork", "--kill-child",
                                f"--mount-proc={root}/proc", "chroot", root,
                                "python3", "-c", ESCAPE, job], check=False).stdout)
        assert control["input"] == '{"pull_secret": "OPS"}' and control["wrote"] == "yes", \
            control
        vm.ssh(f"echo CONDUCTOR-READS-THIS > {job}/exit_code")

        vm.write_text("/tmp/escape/drive.py", DRIVE)
        seen = _seen(vm.ssh(["python3", "/tmp/escape/drive.py", root, job, ESCAPE]).stdout)
        assert seen["input"] == "absent" and seen["wrote"] == "no", seen
        listed = vm.ssh(f"ls -A {root}").stdout.split()
        assert sorted(seen["top"].split()) == sorted(listed), (seen, listed)
        assert vm.ssh(["cat", f"{job}/exit_code"]).stdout == "CONDUCTOR-READS-THIS\n"
    finally:
        vm.ssh(f"umount {root}/usr; rm -rf /tmp/escape {job}", check=False)
