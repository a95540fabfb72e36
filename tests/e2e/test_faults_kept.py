"""Power cuts (qemu SIGKILLed) over data a re-provision keeps that the other power-cut cases do
not hold (issue 57): a Fuel document's `keep_data` volumes through the nailgun data driver, and
a LUKS2 volume on a kept partition. Each: the kept content's sha256 taken before, the power cut
during the image write (after the wipe of what is not kept), the content read back after the
cut and after the same document run again to its end.

Outside CI (tox -e e2e-faults, marker `faults`). The cuts at the other phases:
tests/e2e/test_faults_power.py; at the bootloader: tests/e2e/test_faults_boot.py.
"""

import secrets

import pytest

from tests.e2e.faults_server import ImageServer
from tests.e2e.test_faults_power import (
    BYSTANDER,
    Watcher,
    bystander_sha,
    make_image,
    places,
    seed_bystander,
)
from tests.vmbench import FileServer, testos

pytestmark = pytest.mark.faults

MiB = 1 << 20
MARKER = r"PROVISION-BOOT-OK cd=(\S+)"


def fuel_document(image_url, keep):
    """A one-disk Fuel provision.json (the shape of samples/provision-vm.json, small): / from
    the gzip'd test OS on a partition, a `partition` volume at /srv/data and the `image` VG's
    pv volume with its glance LV; `keep` puts Fuel's keep_data on both."""
    kept = {"keep_data": True} if keep else {}
    disk = {"type": "disk", "id": "vda", "name": "vda", "extra": ["disk/by-id/virtio-PA-DISK0"],
            "size": 3072, "volumes": [
                {"type": "boot", "size": 300},
                {"type": "lvm_meta_pool", "size": 0},
                {"type": "partition", "mount": "/", "file_system": "ext4", "size": 1536},
                {"type": "partition", "mount": "/srv/data", "file_system": "ext4",
                 "size": 192, **kept},
                {"type": "pv", "vg": "image", "lvm_meta_size": 64, "size": 320, **kept}]}
    image_vg = {"type": "vg", "id": "image", "label": "Image Storage", "min_size": 256,
                "_allocate_size": "all", "volumes": [
                    {"type": "lv", "name": "glance", "mount": "/var/lib/glance",
                     "file_system": "ext4", "size": 256}]}
    return {"uid": "1", "name": "node-1", "hostname": "node-1", "profile": "debian",
            "power_type": "ssh", "slave_name": "node-1", "interfaces": {},
            "kernel_options": {},
            "ks_meta": {"pm_data": {"kernel_params": "console=ttyS0",
                                    "ks_spaces": [disk, image_vg]},
                        "image_data": {"/": {"uri": image_url, "format": "ext4",
                                             "container": "gzip"}}}}


FUEL_KEPT = {"/dev/vda4": "data", "/dev/image/glance": "glance"}


def _kept_sums(vm, seed=False):
    """sha256 of kept.bin on each kept filesystem (written first when seed)."""
    vm.ssh("vgchange -ay image >/dev/null")
    sums = {}
    for dev, name in FUEL_KEPT.items():
        vm.ssh(f"mkdir -p /mnt/{name} && mount {'' if seed else '-o ro '}{dev} /mnt/{name}")
        try:
            if seed:
                vm.ssh(f"head -c 8M /dev/urandom > /mnt/{name}/kept.bin && sync")
            sums[dev] = vm.sha256(f"/mnt/{name}/kept.bin")
        finally:
            vm.ssh(f"umount /mnt/{name}")
    vm.ssh("vgchange -an image >/dev/null")
    return sums


def _cut_during_the_image_write(make_vm, disks, doc, args, name, after=5.0):
    """Boot the disks, run doc, cut the power `after` s into its image write; the events seen."""
    cut = make_vm(disk_images=disks, name=name)
    watch = Watcher("write_image", after, cut.power_cut)
    run = cut.provision(doc, [*args, "--events_fd", "1"], echo=watch)
    assert watch.fired, (f"no image write started: exit {run.returncode}\n"
                         + "\n".join(watch.lines[-40:]))
    done = [e["kind"] for e in watch.events if e.get("event") == "step"
            and e.get("status") == "done"]
    # the wipe of what is not kept and the table were done; the image write was not
    assert "wipe" in done and "partition_table" in done, done
    assert "write_image" not in done and not [
        e for e in watch.events if e.get("event") == "result"]
    assert not cut.running()
    cut.close()
    return watch


def test_power_cut_over_fuel_keep_data_keeps_it_and_the_rerun_boots(make_vm):
    image = testos.build_dir() / "root.ext4.gz"
    with FileServer(image.parent) as srv:
        url = srv.guest_url(image.name)
        vm = make_vm(disks=2, disk_size="3G", keep_disks=True, name="cut-fuel-0")
        disks = list(vm.disk_images)
        args = ["--data_driver", "nailgun", "--debug"]
        try:
            first = vm.provision(fuel_document(url, False), args)
            assert first.returncode == 0, first.stderr[-3000:] + first.log[-3000:]
            sums = _kept_sums(vm, seed=True)
            bystander = seed_bystander(vm)
            vm.stop()
            table = places(disks[0])
            doc = fuel_document(url, True)
            _cut_during_the_image_write(make_vm, disks, doc, args, "cut-fuel-1")
            again = make_vm(disk_images=disks, name="cut-fuel-2")
            assert _kept_sums(again) == sums, "the kept volumes changed with the cut"
            rerun = again.provision(doc, args)
            assert rerun.returncode == 0, rerun.stderr[-3000:] + rerun.log[-3000:]
            assert "keep volume group image" in rerun.log
            assert not [ln for ln in rerun.log.splitlines() if "run:" in ln and "mkfs" in ln
                        and ("/dev/vda4" in ln or "glance" in ln)], "a kept volume formatted"
            assert _kept_sums(again) == sums, "the kept volumes changed with the re-run"
            again.stop()
            assert places(disks[0]) == table
            assert bystander_sha(disks[BYSTANDER]) == bystander
            booted = make_vm(disk_images=disks[:1], boot="disk", name="cut-fuel-3")
            cd = booted.wait_console(MARKER, timeout=1800).group(1)
            assert cd != "none", "the installed system found no configdrive"
            print(f"fuel keep_data cut 5 s into the image write: {len(sums)} kept volumes' "
                  f"sha256 unchanged after the cut and the re-run (exit 0); booted, cd={cd}")
        finally:
            vm.keep_disks = False


def luks_layout(image_url, checksum, keep):
    """/ from a small image and a partition holding a LUKS2 volume made outside the layout
    (an owner's encrypted data); `keep` keeps the partition. No bootloader: this case is about
    the kept volume, the boots are the other cases'."""
    kept = {"keep": True} if keep else {}
    return {
        "version": 1,
        "disks": [{"id": "d0", "match": {"serial": "PA-DISK0"}, "partitions": [
            {"id": "root", "size": "256MiB"},
            {"id": "scratch", "size": "128MiB"},
            {"id": "vault", "size": "192MiB", **kept}]}],
        "filesystems": [{"device": "root", "type": "ext4", "mount": "/"},
                        {"device": "scratch", "type": "ext4", "mount": "/srv/scratch"}],
        "images": [{"uri": image_url, "format": "raw", "target": "root", "checksum": checksum}],
        "bootloader": {"type": "none"},
    }


VAULT = "/dev/vda3"
KEY = "/tmp/vault.key"      # the ramdisk's tmpfs: gone with each boot, put back from the test


def _vault(vm, key, command):
    """Open the vault with its key (from a file on the ramdisk's tmpfs, never an argument),
    run command with it mounted at /mnt/v, close it."""
    vm.ssh(f"umask 077 && cat > {KEY}", input=key)
    vm.ssh(f"cryptsetup open --key-file {KEY} {VAULT} vault && mkdir -p /mnt/v "
           f"&& mount /dev/mapper/vault /mnt/v")
    try:
        return vm.ssh(command).stdout
    finally:
        vm.ssh(f"umount /mnt/v; cryptsetup close vault; shred -u {KEY}", check=False)


def _no_key_anywhere(key, vm, runs, lines):
    said = "".join(r.stdout + r.stderr + r.log for r in runs) + "\n".join(lines) \
        + vm.console_text()
    assert key not in said, "the vault's key is in a log"


def test_power_cut_over_a_kept_luks2_volume_keeps_it_and_it_still_opens(make_vm, tmp_path):
    img, checksum = make_image(tmp_path, 64)
    key = secrets.token_hex(32)
    srv = ImageServer(img.parent, rate=4 * MiB).start()     # the write spans ~16 s
    try:
        url = srv.guest_url(img.name)
        vm = make_vm(disks=2, disk_size="1G", keep_disks=True, name="cut-luks-0")
        disks = list(vm.disk_images)
        try:
            first = vm.provision(luks_layout(url, checksum, False), ["--debug"])
            assert first.returncode == 0, first.stderr[-3000:] + first.log[-3000:]
            vm.ssh(f"umask 077 && cat > {KEY}", input=key)
            vm.ssh(f"cryptsetup luksFormat -q --type luks2 --pbkdf pbkdf2 --pbkdf-force-iterations"
                   f" 1000 --key-file {KEY} {VAULT} && cryptsetup open --key-file {KEY} {VAULT} "
                   f"vault && mkfs.ext4 -q /dev/mapper/vault && cryptsetup close vault "
                   f"&& shred -u {KEY}")
            total = _vault(vm, key, "head -c 8M /dev/urandom > /mnt/v/kept.bin && sync "
                                    "&& sha256sum /mnt/v/kept.bin").split()[0]
            uuid = vm.ssh(f"cryptsetup luksUUID {VAULT}").stdout.strip()
            header = vm.ssh(f"head -c 16M {VAULT} | sha256sum").stdout.split()[0]
            bystander = seed_bystander(vm)
            vm.stop()
            doc = luks_layout(url, checksum, True)
            cut = _cut_during_the_image_write(make_vm, disks, doc, ["--debug"], "cut-luks-1",
                                              after=3.0)
            again = make_vm(disk_images=disks, name="cut-luks-2")
            read = "sha256sum /mnt/v/kept.bin"
            assert _vault(again, key, read).split()[0] == total, "the vault changed with the cut"
            assert again.ssh(f"head -c 16M {VAULT} | sha256sum").stdout.split()[0] == header
            rerun = again.provision(doc, ["--debug"])
            assert rerun.returncode == 0, rerun.stderr[-3000:] + rerun.log[-3000:]
            assert again.ssh(f"cryptsetup luksUUID {VAULT}").stdout.strip() == uuid
            assert again.ssh(f"head -c 16M {VAULT} | sha256sum").stdout.split()[0] == header
            assert _vault(again, key, read).split()[0] == total, "the re-run changed the vault"
            _no_key_anywhere(key, again, [first, rerun], cut.lines)
            again.stop()
            assert bystander_sha(disks[BYSTANDER]) == bystander
            print(f"kept LUKS2 volume {uuid}: cut 3 s into the image write; the header and "
                  f"the decrypted file's sha256 {total[:16]} unchanged after the cut and the "
                  "re-run (exit 0); opens with its key")
        finally:
            vm.keep_disks = False
    finally:
        srv.stop()

