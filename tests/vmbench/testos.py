"""The bootable test OS (tests/images/build-debian.sh, cached outside the clone) in the shapes
images come in: a zstd or gzip ext4 root image, a zstd tar, a qcow2 whole-disk image, its
kernel and initrd.

Each shape is made once per test-OS build and kept next to it, so a second demo or test run
only pays for the first.
"""

import hashlib
import os
import subprocess
from pathlib import Path

from tests.vmbench.ramdisk import REPO_ROOT

MiB = 1 << 20


def build_dir(flavour=None):
    """The cache directory holding root.ext4.zst and root.tar.zst (built when missing);
    flavour "crypt": the test OS that opens encrypted volumes at boot (clevis, cryptsetup);
    "secureboot": the one with Debian's signed boot chain (shim-signed, grub-efi-amd64-signed);
    "iscsi": with open-iscsi, for / on an iSCSI LUN; "dracut": its initramfs built by dracut
    (clevis-dracut for TPM2) instead of initramfs-tools."""
    out = subprocess.run([str(REPO_ROOT / "tests" / "images" / "build-debian.sh")]
                         + ([flavour] if flavour else []),
                         check=True, stdout=subprocess.PIPE, text=True, timeout=3600)
    return Path(out.stdout.strip().splitlines()[-1])


def _made(path, make):
    """path, made by make(partial_path) unless it is already there; a run that dies half-way
    leaves a partial file under another name, never a truncated `path`."""
    if not path.exists():
        part = path.with_name(f".{path.name}.{os.getpid()}")
        try:
            make(part)
            part.rename(path)
        finally:
            part.unlink(missing_ok=True)
    return path


def _pipe(first, second, out):
    with open(out, "wb") as dst:
        src = subprocess.Popen(first, stdout=subprocess.PIPE)
        subprocess.run(second, stdin=src.stdout, stdout=dst, check=True)
        src.stdout.close()
        if src.wait() != 0:
            raise subprocess.CalledProcessError(src.returncode, first)


def ext4_zst():
    return build_dir() / "root.ext4.zst"


def tar_zst():
    return build_dir() / "root.tar.zst"


def crypt_tar_zst():
    return build_dir("crypt") / "root.tar.zst"


def secureboot_tar_zst():
    return build_dir("secureboot") / "root.tar.zst"


def iscsi_tar_zst():
    """The test OS with open-iscsi: its initramfs logs in to the target / is on."""
    return build_dir("iscsi") / "root.tar.zst"


# bcache-tools' files the installed system uses (its udev rule and helpers, the initramfs-tools
# hook, the tools), at their merged-/usr places; the test OS has no dracut, doc or man pages
BCACHE_FILES = ("usr/lib/udev/rules.d/69-bcache.rules", "usr/lib/udev/bcache-register",
                "usr/lib/udev/probe-bcache", "usr/lib/udev/bcache-keep-symlinks",
                "usr/share/initramfs-tools/hooks/bcache", "usr/sbin/make-bcache",
                "usr/sbin/bcache-super-show")


def bcache_tar_zst():
    """The test OS tar with Debian's bcache-tools added (what the bcache_boot step checks and
    the initramfs needs for a / on bcache). Made from the plain tar and the host's `apt-get
    download bcache-tools` (its files appended to the tar, not in the dpkg database) and kept
    next to the test OS, so build-debian.sh and its cache key stay as they are."""
    src = tar_zst()

    def make(part):
        work = part.with_name(part.name + ".d")
        plain, deb_tree = work / "root.tar", work / "deb"
        try:
            deb_tree.mkdir(parents=True)
            subprocess.run(["apt-get", "download", "-q", "bcache-tools"], cwd=work, check=True,
                           capture_output=True, timeout=300)
            deb = next(work.glob("bcache-tools_*.deb"))
            subprocess.run(["dpkg-deb", "-x", str(deb), str(deb_tree)], check=True)
            # the package ships /lib/udev; the test OS's /lib is a link to usr/lib
            subprocess.run(["cp", "-a", str(deb_tree / "lib" / "udev"),
                            str(deb_tree / "usr" / "lib")], check=True)
            subprocess.run(["zstd", "-q", "-d", "-f", str(src), "-o", str(plain)], check=True)
            subprocess.run(["tar", "-rf", str(plain), "--owner=0", "--group=0", "-C",
                            str(deb_tree), *(f"./{f}" for f in BCACHE_FILES)], check=True)
            subprocess.run(["zstd", "-q", "-T0", "-10", "-f", str(plain), "-o", str(part)],
                           check=True)
        finally:
            subprocess.run(["rm", "-rf", str(work)], check=True)

    return _made(src.with_name("root-bcache.tar.zst"), make)


def ext4_gz():
    """The ext4 root image as Fuel ships root images: gzip'd."""
    src = ext4_zst()
    return _made(src.with_name("root.ext4.gz"),
                 lambda part: _pipe(["zstd", "-dc", str(src)], ["gzip", "-1"], part))


def disk_qcow2():
    """A whole-disk image: GPT with the ext4 root as its one partition (from 1 MiB), in
    compressed qcow2 as cloud images come (provision converts a qcow2 from a copy in the
    ramdisk's RAM: uncompressed, this one would not fit a 2 GiB VM). Put together in a plain
    file: the host cannot scan partitions on loop devices."""
    src = ext4_zst()

    def make(part):
        raw = part.with_suffix(".raw")
        try:
            ext4 = raw.with_suffix(".ext4")
            subprocess.run(["zstd", "-q", "-d", "-f", str(src), "-o", str(ext4)], check=True)
            size = ext4.stat().st_size
            with open(raw, "wb") as f:
                f.truncate(2 * MiB + size)
            subprocess.run(["sgdisk", "-n1:2048:+%dK" % (size // 1024), "-t1:8300",
                            "-c1:root", str(raw)], check=True, capture_output=True)
            subprocess.run(["dd", f"if={ext4}", f"of={raw}", "bs=1M", "seek=1", "conv=notrunc",
                            "status=none"], check=True)
            ext4.unlink()
            subprocess.run(["qemu-img", "convert", "-q", "-c", "-f", "raw", "-O", "qcow2",
                            str(raw), str(part)], check=True)
        finally:
            for leftover in (raw, raw.with_suffix(".ext4")):
                leftover.unlink(missing_ok=True)

    return _made(src.with_name("disk-compressed.qcow2"), make)


def _boot_file(prefix):
    tar = build_dir() / "root.tar.zst"

    def make(part):
        listing = subprocess.run(["tar", "--zstd", "-tf", str(tar)], check=True,
                                 capture_output=True, text=True).stdout.split()
        member = next(m for m in listing if m.startswith(f"./boot/{prefix}-"))
        _pipe(["tar", "--zstd", "-xOf", str(tar), member], ["cat"], part)

    return _made(tar.with_name(prefix), make)


def kernel():
    return _boot_file("vmlinuz")


def initrd():
    return _boot_file("initrd.img")


def checksum(path):
    """The "sha256:<hex>" an image entry of a layout carries for a file served to the VM."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()
