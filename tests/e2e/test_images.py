"""Images in the VM bench: a zstd tar rootfs extracted onto RAID1 + LVM root, and an
uncompressed whole-disk GPT image (received straight into the blocks it is written from, zero
blocks skipped) written to a third disk with a configdrive partition added after the image's
own, in one provision run over HTTP; contents, owners, modes, hard
links and xattrs read back inside the VM, the written disk also from its image file outside.

The gzip ext4 image written to an LV and grown is covered by test_fuel_sample.py.
"""

import hashlib
import json
import os
import subprocess

from tests.vmbench import FileServer, images
from tests.vmbench.ramdisk import REPO_ROOT

MiB = 1 << 20


def sha256_file(path):
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def make_tar(tmp_path, served):
    tree = tmp_path / "rootfs"
    (tree / "etc").mkdir(parents=True)
    (tree / "srv" / "blob").parent.mkdir()
    (tree / "etc" / "hostname").write_text("from-the-tar\n")
    (tree / "srv" / "blob").write_bytes(os.urandom(6 * MiB))
    os.link(tree / "srv" / "blob", tree / "srv" / "blob-link")
    (tree / "etc" / "secret").write_text("0640 and owned by 1234:5678\n")
    os.chmod(tree / "etc" / "secret", 0o640)
    os.chown(tree / "etc" / "secret", 1234, 5678)
    os.symlink("hostname", tree / "etc" / "alias")
    os.setxattr(tree / "etc" / "hostname", "user.provision", b"kept")
    tar = served / "rootfs.tar.zst"
    subprocess.run(["tar", "--zstd", "--numeric-owner", "--xattrs", "--xattrs-include=*",
                    "-C", str(tree), "-cf", str(tar), "."], check=True)
    return tar, hashlib.sha256((tree / "srv" / "blob").read_bytes()).hexdigest()


def make_disk_image(tmp_path, served, gzipped=False):
    """64 MiB GPT disk: one ext4 partition (with a marker file) from sector 2048 on, the
    rest zeros; served as it is, like a Glance raw image, or gzip'd. Built in a file: the
    host cannot scan partitions on loop devices."""
    tree = tmp_path / "disktree"
    tree.mkdir()
    (tree / "marker").write_text("whole-disk image\n")
    raw = (tmp_path if gzipped else served) / "disk.img"
    with open(raw, "wb") as f:
        f.truncate(64 * MiB)
    subprocess.run(["sgdisk", "-n1:2048:+32M", "-t1:8300", "-c1:imaged", str(raw)],
                   check=True, capture_output=True)
    part = images.partition_table(raw)["partitions"][0]
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "imaged", "-d", str(tree),
                    "-E", f"offset={part['start'] * 512}", str(raw),
                    f"{part['size'] * 512 // 1024}k"], check=True, capture_output=True)
    if not gzipped:
        return raw
    gz = served / "disk.img.gz"
    with open(gz, "wb") as out:
        subprocess.run(["gzip", "-6", "-c", str(raw)], stdout=out, check=True)
    return gz


def test_tar_onto_raid1_lvm_and_whole_disk_image(make_vm, tmp_path):
    served = tmp_path / "srv"
    served.mkdir()
    tar, blob_sha = make_tar(tmp_path, served)
    disk_img = make_disk_image(tmp_path, served)
    doc = json.loads((REPO_ROOT / "samples" / "two-disk-raid-lvm.json").read_text())
    doc["disks"].append({"id": "disk2", "match": {"name": "/dev/vdc"}})
    # as Ironic does for whole-disk images: a partition added after the image's own
    doc["configdrive"] = {"format": "config-2", "disk": "disk2",
                          "meta_data": {"uuid": "images-e2e", "hostname": "imaged"}}
    vm = make_vm(disks=3, disk_size="4G")
    with FileServer(served) as srv:
        doc["images"] = [
            {"uri": srv.guest_url(tar.name), "format": "tar", "target": "/",
             "checksum": sha256_file(tar)},
            {"uri": srv.guest_url(disk_img.name), "format": "disk", "target": "disk2",
             "checksum": sha256_file(disk_img)},
        ]
        # virtio disks say rotational, so the default (auto) would not pre-zero them
        run = vm.provision(doc, ["--debug", "--image_zero_target", "always"])
        assert run.returncode == 0, run.stderr[-3000:] + "\n" + run.log[-5000:]
        assert {"/" + tar.name, "/" + disk_img.name} <= set(srv.requested), srv.requested

    # the whole-disk image: zero blocks seeked over, table read back, backup GPT at the end
    wrote = [line for line in run.log.splitlines() if "zero bytes skipped" in line
             and "/dev/vdc" in line]
    assert wrote, run.log[-3000:]
    skipped = int(wrote[-1].split("(")[1].split()[0])
    assert skipped >= 30 * MiB, wrote[-1]
    verify = vm.ssh("sgdisk -v /dev/vdc").stdout     # complains of a backup header mid-disk
    assert "No problems found" in verify, verify
    vm.ssh("mkdir -p /mnt/d && mount -o ro /dev/vdc1 /mnt/d")
    try:
        assert vm.read_text("/mnt/d/marker") == "whole-disk image\n"
    finally:
        vm.ssh("umount /mnt/d")
    assert vm.ssh("blkid -L config-2").stdout.strip() == "/dev/vdc2"
    vm.ssh("mkdir -p /mnt/cd && mount -o ro /dev/vdc2 /mnt/cd")
    try:
        meta = json.loads(vm.read_text("/mnt/cd/openstack/latest/meta_data.json"))
        assert meta["uuid"] == "images-e2e" and meta["hostname"] == "imaged"
    finally:
        vm.ssh("umount /mnt/cd")

    # the tar: extracted onto the LVM root on RAID1, metadata kept
    assert "Raid Level : raid1" in vm.mdadm_detail("/dev/md/os")
    vm.ssh("mkdir -p /mnt/r && mount -o ro /dev/os/root /mnt/r")
    try:
        assert vm.read_text("/mnt/r/etc/hostname") == "from-the-tar\n"
        assert vm.sha256("/mnt/r/srv/blob") == blob_sha
        st = vm.ssh("stat -c '%i %h' /mnt/r/srv/blob /mnt/r/srv/blob-link").stdout.split("\n")
        assert st[0] == st[1] and st[0].split()[1] == "2", st
        assert vm.ssh("stat -c '%a %u %g' /mnt/r/etc/secret").stdout.strip() == "640 1234 5678"
        assert vm.ssh("readlink /mnt/r/etc/alias").stdout.strip() == "hostname"
        xattr = vm.ssh("getfattr --only-values -n user.provision /mnt/r/etc/hostname",
                       check=False)
        if xattr.returncode == 127:     # no getfattr in the ramdisk: python can read it
            xattr = vm.ssh("python3 -c \"import os; print(os.getxattr("
                           "'/mnt/r/etc/hostname', 'user.provision').decode(), end='')\"")
        assert xattr.stdout == "kept"
        fstab = vm.read_text("/mnt/r/etc/fstab")
        assert "/srv/data" in fstab and "/boot" in fstab
    finally:
        vm.ssh("umount /mnt/r")
    vm.stop()

    # from outside: the disk image file holds the imaged table and filesystem
    parts = images.probe_partitions(vm.disk_images[2])
    assert [(p["name"], tags.get("LABEL")) for p, tags in parts] == [
        ("imaged", "imaged"), ("config-2", "config-2")]
    assert parts[1][0]["start"] + parts[1][0]["size"] > (4 << 30) // 512 - 2048, parts[1][0]


def test_signed_whole_disk_image_bad_then_good(make_vm, tmp_path):
    """A signed gzip GPT image in the VM: under a stranger's signature provision exits 5 and
    the disk shows no table, no filesystem and zeros where the table and both GPT backups
    would be; under the publisher's it is written and its filesystem mounts. sqv is the
    ramdisk's; the keyring is given at run time."""
    from tests import signing_keys
    (tmp_path / "gpg").mkdir()
    keys = signing_keys.Keys(str(tmp_path / "gpg"))
    try:
        served = tmp_path / "srv"
        served.mkdir()
        disk_gz = make_disk_image(tmp_path, served, gzipped=True)
        vm = make_vm(disks=1, disk_size="1G")
        vm.put(keys.keyring, "/tmp/keyring.pgp")
        doc = {"version": 1, "disks": [{"id": "d0", "match": {"name": "/dev/vda"}}]}
        with FileServer(served) as srv:
            image = {"uri": srv.guest_url(disk_gz.name), "format": "disk", "target": "d0",
                     "checksum": sha256_file(disk_gz)}
            doc["images"] = [dict(image, signature=keys.stranger_sign(disk_gz))]
            bad = vm.provision(doc, ["--image_keyring", "/tmp/keyring.pgp"])
            doc["images"] = [dict(image, signature=keys.sign(disk_gz))]
            vm.ssh("blockdev --rereadpt /dev/vda", check=False)
            shown = {"blkid": vm.ssh("blkid -p /dev/vda", check=False).stdout,
                     "parts": vm.ssh("lsblk -rno NAME /dev/vda").stdout.split(),
                     "zero": [vm.ssh(f"dd if=/dev/vda bs=1M skip={mib} count=1 status=none | "
                                     "tr -d '\\0' | wc -c").stdout.strip()
                              for mib in (0, 63, 1023)]}
            good = vm.provision(doc, ["--image_keyring", "/tmp/keyring.pgp"])
    finally:
        keys.close()
    assert bad.returncode == 5, bad.stderr[-3000:]
    # sqv's reason for a key the keyring lacks, not a failure of its own to start or read
    assert "does not verify against the keyring (sqv: Missing key" in bad.stderr, bad.stderr
    assert "BEGIN PGP SIGNATURE" not in bad.stderr + bad.log
    assert shown == {"blkid": "", "parts": ["vda"], "zero": ["0", "0", "0"]}, shown
    assert good.returncode == 0, good.stderr[-3000:] + "\n" + good.log[-3000:]
    assert "signature verified" in good.log
    vm.ssh("mkdir -p /mnt/d && mount -o ro /dev/vda1 /mnt/d")
    try:
        assert vm.read_text("/mnt/d/marker") == "whole-disk image\n"
    finally:
        vm.ssh("umount /mnt/d")
