"""The bootable whole-disk image the head-to-head gives both sides (benchmarks/head_to_head.py).

IPA writes only raw and qcow2 images, and the test OS cache has none that boots as a whole
disk (`disk-compressed.qcow2` has no bootloader). The host cannot scan partitions on loop
devices, so the image is made the way a machine would get it: our ramdisk in the VM bench
provisions a small disk (GPT, bios_grub, the test OS's ext4 root, grub from the image), and
that disk's file is the image. Made once and kept under the cache, keyed by what went in: the
test OS build, the layout and this recipe's version; the ramdisk that ran provision is
recorded in the manifest, not keyed (it only carries the bytes of the test OS onto the disk).

    python3 -m benchmarks.head_to_head_image [--firmware bios]      # prints the image's path
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.vmbench import testos  # noqa: E402
from tests.vmbench.ramdisk import Ramdisk, cache_dir  # noqa: E402

RECIPE = 1
# Big enough for the test OS's 931 MiB ext4 and the initramfs grub's step rebuilds in it
# (and UEFI's 128 MiB ESP); small because both sides download and write every byte of a raw
# image.
DISK_SIZES = {"bios": "1G", "uefi": "1152M"}


def layout(firmware, image_uri, image_checksum):
    """BIOS: GPT with a bios_grub partition; UEFI: an ESP, grub at the removable path too
    (a machine's fresh NVRAM has no entry for it)."""
    if firmware not in ("bios", "uefi"):
        raise ValueError(f"a whole-disk image is made for bios or uefi, not {firmware!r}")
    boot = ({"id": "bios", "size": "1MiB", "type": "bios_grub"} if firmware == "bios" else
            {"id": "esp", "size": "128MiB", "type": "esp"})
    esp = ([{"device": "esp", "type": "vfat", "mount": "/boot/efi", "label": "EFI"}]
           if firmware == "uefi" else [])
    return {
        "version": 1,
        "disks": [{"id": "disk0", "match": {"name": "/dev/vda"}, "table": "gpt",
                   "partitions": [boot, {"id": "root", "size": "remaining", "type": "linux",
                                         "name": "root"}]}],
        "filesystems": [{"device": "root", "type": "ext4", "mount": "/", "label": "root"}] + esp,
        "images": [{"uri": image_uri, "format": "raw", "target": "root",
                    "checksum": image_checksum}],
        "bootloader": {"boot_mode": firmware, "kernel_params": "console=ttyS0"},
    }


def key(firmware, test_os_dir):
    """What the image is made from; the URI the VM fetches it by is not part of it."""
    shape = layout(firmware, "", "")       # refuses a firmware it has no image for
    doc = {"recipe": RECIPE, "test_os": Path(test_os_dir).name,
           "disk_size": DISK_SIZES[firmware], "layout": shape}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def image_dir(firmware, test_os_dir):
    return cache_dir() / "head-to-head-images" / f"{firmware}-{key(firmware, test_os_dir)}"


def sha256(path):
    return testos.checksum(path).split(":", 1)[1]


def _publish(tmp, out, manifest):
    """tmp, with its manifest, becomes out (a run that dies half-way leaves no out)."""
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def ensure_whole_disk(firmware, ramdisk, test_os_dir=None):
    """The directory holding disk-<firmware>.raw and manifest.json (sha256, root UUID, how it
    was made); made in the VM bench (root, qemu) when missing."""
    test_os_dir = Path(test_os_dir or testos.build_dir())
    out = image_dir(firmware, test_os_dir)
    if (out / "manifest.json").exists():
        return out
    from tests.vmbench import VM, FileServer

    started = time.monotonic()
    source = test_os_dir / "root.ext4.zst"
    tmp = out.with_name(out.name + f".{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        with FileServer(test_os_dir) as srv, VM(
                disks=1, disk_size=DISK_SIZES[firmware], name="h2h-image", ramdisk=ramdisk,
                firmware=firmware, serials=["disk0"], keep_disks=True) as vm:
            doc = layout(firmware, srv.guest_url(source.name), testos.checksum(source))
            run = vm.provision(doc, ["--debug"])
            if run.returncode != 0:
                raise RuntimeError(f"provision exited {run.returncode}:\n{run.log[-4000:]}")
            root_uuid = vm.ssh("blkid -s UUID -o value /dev/vda2").stdout.strip()   # root
            vm.stop()
            raw = tmp / f"disk-{firmware}.raw"
            subprocess.run(["cp", "--sparse=always", str(vm.disk_images[0]), str(raw)],
                           check=True)
        shutil.rmtree(vm.workdir, ignore_errors=True)
        manifest = {"file": raw.name, "bytes": raw.stat().st_size, "sha256": sha256(raw),
                    "root_uuid": root_uuid, "test_os": test_os_dir.name,
                    "ramdisk": str(ramdisk.directory), "recipe": RECIPE,
                    "layout": layout(firmware, "<served>", testos.checksum(source)),
                    "seconds": round(time.monotonic() - started, 1)}
        _publish(tmp, out, manifest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def ensure_qcow2(out):
    """Row 1's image again as compressed qcow2 (how cloud images come from Glance), beside the
    raw one and made from it: the same bytes once inflated. Returns its file name."""
    raw = json.loads((out / "manifest.json").read_text())["file"]
    path = out / (Path(raw).stem + ".qcow2")
    if not path.exists():
        tmp = path.with_name(path.name + f".{os.getpid()}")
        subprocess.run(["qemu-img", "convert", "-c", "-O", "qcow2", "-f", "raw",
                        str(out / raw), str(tmp)], check=True)
        tmp.rename(path)
    return path.name


def ensure_partition_image(test_os_dir=None):
    """Row 2's partition image: the test OS's ext4 root as raw bytes (IPA inflates nothing),
    with the test OS's kernel and initrd beside it, since an HTTP partition image is named by
    its kernel and ramdisk (the ramdisk in the cached image predates ours reading
    instance_info.image_type); keyed by the test OS build alone."""
    test_os_dir = Path(test_os_dir or testos.build_dir())
    out = cache_dir() / "head-to-head-images" / f"partition-{test_os_dir.name}"
    if (out / "manifest.json").exists():
        return out
    tmp = out.with_name(out.name + f".{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        subprocess.run(["zstd", "-q", "-d", str(test_os_dir / "root.ext4.zst"), "-o",
                        str(tmp / "root.ext4")], check=True)
        for name, src in (("vmlinuz", testos.kernel()), ("initrd.img", testos.initrd())):
            shutil.copyfile(src, tmp / name)
        manifest = {"file": "root.ext4", "bytes": (tmp / "root.ext4").stat().st_size,
                    "sha256": sha256(tmp / "root.ext4"), "kernel": "vmlinuz",
                    "ramdisk": "initrd.img", "test_os": test_os_dir.name}
        _publish(tmp, out, manifest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--firmware", default="bios")
    ap.add_argument("--ramdisk", default=os.environ.get("PROVISION_RAMDISK_DIR")
                    or str(cache_dir() / "ramdisk" / "current"))
    args = ap.parse_args()
    print(ensure_whole_disk(args.firmware, Ramdisk(Path(args.ramdisk))))


if __name__ == "__main__":
    main()
