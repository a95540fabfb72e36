"""Layouts on disks of 4096-byte logical sectors (4Kn) and on 512e disks (512 logical, 4096
physical) in the VM bench, provisioned and then booted from the disks alone: GPT + RAID1 + LVM
on two 4Kn virtio-blk disks (UEFI), an msdos layout with logical partitions on a 4Kn SCSI disk
(UEFI), a re-provision keeping a partition on an NVMe namespace of 4 KiB LBAs (UEFI), and
BIOS on a 512e disk. Each partition is read back from the guest (sfdisk, in the disk's own
sectors) at the bytes the JSON plan gives, on whole physical blocks. BIOS cannot boot a 4Kn
disk (SeaBIOS refuses it, as server firmware does in legacy mode): that is shown here and
refused at plan time. A whole-disk image made for 512-byte sectors is refused on a 4Kn disk,
raw and qcow2, before any of it is written.

Slow (five provision-and-boot cycles): `tox -e e2e-sectors`, outside CI; the refusal of the
512-byte whole-disk images runs in CI's e2e (one ramdisk boot, no OS boot).
"""

import hashlib
import json
import pathlib
import subprocess
import time

import pytest

from tests.vmbench import VM, FileServer, testos
from tests.vmbench.ramdisk import REPO_ROOT

MiB = 1 << 20
MARKER = r"PROVISION-BOOT-OK cd=(\S+) mpath=\S+ root=(\S+) keys=(\S+)"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFourKnSectorsProvisionAgentTestKey0000000"
FOUR_KN, FIVE_12E = (4096, 4096), (512, 4096)
TIMES = {}


@pytest.fixture(scope="module", autouse=True)
def report_times():
    """What each case read back and how long it took: printed, and kept in
    artifacts/vmbench/sector-sizes.json (an xdist worker's output is not shown)."""
    yield
    for case, line in TIMES.items():
        print(f"\nsectors: {case}: {line}")
    if TIMES:
        out = REPO_ROOT / "artifacts" / "vmbench"
        out.mkdir(parents=True, exist_ok=True)
        (out / "sector-sizes.json").write_text(json.dumps(TIMES, indent=1) + "\n")


def _image_doc(doc, srv, test_os, target):
    image = test_os / "root.ext4.zst"
    doc["images"] = [{"uri": srv.guest_url(image.name), "format": "raw", "target": target,
                      "checksum": testos.checksum(image)}]
    doc.setdefault("bootloader", {})["kernel_params"] = "console=ttyS0"
    doc["configdrive"] = {"format": "config-2",
                          "meta_data": {"uuid": "sectors-e2e", "public_keys": {"k": KEY}}}
    return doc


def _plan(vm, doc):
    run = vm.provision(doc, ["--dry_run", "--plan_format", "json"])
    assert run.returncode == 0, run.stdout + run.stderr + run.log
    return json.loads(run.stdout[run.stdout.index("{"):])


def _read_back(vm, plan):
    """Each planned partition read back from the disk's table in the guest: in the disk's own
    sectors, at the plan's bytes, on whole physical blocks. Returns a line per disk."""
    lines = []
    for disk in plan["layout"]["disks"]:
        if not disk["partitions"]:
            continue
        dev, name = disk["device"], pathlib.Path(disk["device"]).name
        queue = [int(vm.read_text(f"/sys/class/block/{name}/queue/{q}_block_size"))
                 for q in ("logical", "physical")]
        assert queue == [disk["logical_block_size"], disk["physical_block_size"]], (dev, queue)
        logical, physical = queue
        table = json.loads(vm.ssh(["sfdisk", "--json", dev]).stdout)["partitiontable"]
        assert table["sectorsize"] == logical
        got = {p["node"]: (p["start"] * logical, p["size"] * logical)
               for p in table["partitions"]}
        want = {p["device"]: (p["offset"], p["size"]) for p in disk["partitions"]
                if p["kind"] != "extended"}
        assert {node: got[node] for node in want} == want, (dev, got, want)
        for node, (offset, size) in want.items():
            assert offset % physical == 0 and size % physical == 0 and offset % MiB == 0, node
            # the kernel's view (sysfs counts in 512-byte units whatever the sector size)
            part = pathlib.Path(node).name
            assert int(vm.read_text(f"/sys/class/block/{part}/start")) * 512 == offset, node
        lines.append(f"{dev} {logical}/{physical} {table['label']}: " + ", ".join(
            f"{pathlib.Path(n).name}@{o // MiB}MiB+{s // MiB}MiB" for n, (o, s) in want.items()))
    return "; ".join(lines)


def _provision_and_boot(make_vm, doc, case, *, disks, bus, block_size, firmware,
                        between=None, disk_size="4G"):
    """Plan (dry run, JSON), provision, read the tables back against the plan, then boot the
    disks alone and wait for the test OS's marker. between(vm): more before power-off."""
    t0 = time.monotonic()
    vm = make_vm(disks=disks, disk_size=disk_size, bus=bus, block_size=block_size,
                 firmware=firmware, keep_disks=True)
    plan = _plan(vm, doc)
    run = vm.provision(doc, ["--debug"])
    assert run.returncode == 0, run.log
    seen = _read_back(vm, plan)
    extra = between(vm) if between else None
    vm.stop()
    provision_s = time.monotonic() - t0
    t1 = time.monotonic()
    booted = make_vm(disk_images=list(vm.disk_images), bus=bus, block_size=block_size,
                     boot="disk", firmware=firmware)
    m = booted.wait_console(MARKER, timeout=1800)
    TIMES[case] = (f"{seen}; provision {provision_s:.0f} s, boot to marker "
                   f"{time.monotonic() - t1:.0f} s; marker cd={m.group(1)} keys={m.group(3)}")
    vm.keep_disks = False
    # the booted system read its configdrive (on 4Kn: a vfat made there, an ISO is unreadable)
    assert m.group(3) == KEY.split()[1], m.group(0)
    return m, run, vm, extra


@pytest.fixture(scope="session")
def test_os():
    return testos.build_dir()


def _uefi_raid1_lvm(srv, test_os):
    doc = json.loads((pathlib.Path(__file__).parents[2] / "samples"
                      / "uefi-two-disk-raid-lvm.json").read_text())
    return _image_doc(doc, srv, test_os, "lv-root")


@pytest.mark.sectors
def test_uefi_gpt_raid1_lvm_on_two_4kn_virtio_disks_boots(make_vm, test_os):
    with FileServer(test_os) as srv:
        m, run, _, _ = _provision_and_boot(make_vm, _uefi_raid1_lvm(srv, test_os),
                                           "4Kn virtio GPT RAID1 LVM UEFI", disks=2,
                                           bus="virtio", block_size=FOUR_KN, firmware="uefi")
    assert "md" in m.group(2) and "lvm" in m.group(2), m.group(0)
    assert m.group(1) != "none"


MSDOS = {"version": 1, "disks": [{"id": "disk0", "match": {"name": "/dev/sda"},
                                   "table": "msdos", "partitions": [
    {"id": "esp", "size": "256MiB", "type": "esp", "flags": ["boot"]},
    {"id": "root", "size": "2GiB", "type": "linux"},
    {"id": "swap", "size": "256MiB", "type": "swap"},
    {"id": "tmp", "size": "256MiB", "type": "linux"},
    {"id": "srv", "size": "512MiB", "type": "linux"},      # XFS wants 300 MB at least
    {"id": "home", "size": "remaining", "type": "linux"}]}],
    "filesystems": [
    {"device": "esp", "type": "vfat", "mount": "/boot/efi", "label": "EFI"},
    {"device": "root", "type": "ext4", "mount": "/", "label": "root"},
    {"device": "swap", "type": "swap"},
    {"device": "tmp", "type": "ext4", "mount": "/tmp", "label": "tmp"},
    {"device": "srv", "type": "xfs", "mount": "/srv", "label": "srv"},
    {"device": "home", "type": "ext4", "mount": "/home", "label": "home"}],
    "bootloader": {"boot_mode": "uefi"}}


@pytest.mark.sectors
def test_msdos_with_logical_partitions_on_a_4kn_scsi_disk_boots(make_vm, test_os):
    """Three primaries, the extended partition and three logicals behind their EBRs, on a
    4Kn virtio-scsi disk; the ESP is the msdos 0xef partition OVMF boots from."""
    with FileServer(test_os) as srv:
        doc = _image_doc(json.loads(json.dumps(MSDOS)), srv, test_os, "root")
        m, _, _, _ = _provision_and_boot(make_vm, doc, "4Kn SCSI msdos UEFI", disks=1,
                                         bus="scsi", block_size=FOUR_KN, firmware="uefi")
    assert m.group(2).startswith("sda2:part"), m.group(0)


def _nvme_layout(esp, root, data_keep):
    """ESP, root, a data partition, then the rest; data is at the same bytes when esp + root
    are (2 GiB + 256 MiB either way)."""
    return {"version": 1, "disks": [{"id": "disk0", "match": {"name": "/dev/nvme0n1"},
                                     "partitions": [
        {"id": "esp", "size": esp, "type": "esp"},
        {"id": "root", "size": root, "type": "linux"},
        {"id": "data", "size": "512MiB", "type": "linux", "keep": data_keep},
        {"id": "rest", "size": "remaining", "type": "linux"}]}],
        "filesystems": [
        {"device": "esp", "type": "vfat", "mount": "/boot/efi", "label": "EFI"},
        {"device": "root", "type": "ext4", "mount": "/", "label": "root"},
        {"device": "data", "type": "ext4", "label": "data"},
        {"device": "rest", "type": "ext4", "mount": "/var/lib/rest", "label": "rest"}]}


def _sha256_range(path, offset, size):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(offset)
        left = size
        while left:
            block = f.read(min(left, 4 * MiB))
            assert block, "short read"
            h.update(block)
            left -= len(block)
    return h.hexdigest()


@pytest.mark.sectors
def test_keep_on_a_4kn_nvme_namespace_keeps_the_data_and_boots(make_vm, test_os):
    """First a layout without an OS (data written into its data partition), then a
    re-provision with the data partition kept and the ESP and root around it resized: the kept
    partition's bytes hash the same in the guest after the re-provision and in the image file
    after the installed system booted (nothing mounts it), at the bytes both plans give."""
    first = dict(_nvme_layout("256MiB", "2GiB", False), bootloader={"type": "none"})
    digest = {}

    def before(vm):
        run = vm.provision(first, ["--debug"])
        assert run.returncode == 0, run.log
        vm.ssh("mount /dev/nvme0n1p3 /mnt && head -c 16M /dev/urandom > /mnt/blob && "
               "sha256sum /mnt/blob > /mnt/blob.sha256 && umount /mnt")
        digest["before"] = vm.ssh("sha256sum /dev/nvme0n1p3").stdout.split()[0]

    def after(vm):
        return vm.ssh("sha256sum /dev/nvme0n1p3").stdout.split()[0]

    with FileServer(test_os) as srv:
        doc = _image_doc(_nvme_layout("512MiB", "1792MiB", True), srv, test_os, "root")
        doc["bootloader"]["boot_mode"] = "uefi"
        t0 = time.monotonic()
        vm = make_vm(disks=1, disk_size="4G", bus="nvme", block_size=FOUR_KN, firmware="uefi",
                     keep_disks=True)
        before(vm)
        plan = _plan(vm, doc)
        run = vm.provision(doc, ["--debug"])
        assert run.returncode == 0, run.log
        seen = _read_back(vm, plan)
        assert after(vm) == digest["before"]
        vm.stop()
        provision_s = time.monotonic() - t0
        kept = next(p for p in plan["layout"]["disks"][0]["partitions"] if p["keep"])
        assert (kept["offset"], kept["size"]) == ((1 + 256 + 2048) * MiB, 512 * MiB)
        t1 = time.monotonic()
        booted = make_vm(disk_images=list(vm.disk_images), bus="nvme", block_size=FOUR_KN,
                         boot="disk", firmware="uefi")
        m = booted.wait_console(MARKER, timeout=1800)
        booted.stop()
        assert _sha256_range(vm.disk_images[0], kept["offset"], kept["size"]) == \
            digest["before"]
        vm.keep_disks = False
    TIMES["4Kn NVMe keep UEFI"] = (
        f"{seen}; kept {kept['device']} sha256 {digest['before'][:16]} before and after; "
        f"provision (both runs) {provision_s:.0f} s, boot to marker "
        f"{time.monotonic() - t1:.0f} s; marker cd={m.group(1)} keys={m.group(3)}")
    assert "nvme0n1p2" in m.group(2), m.group(0)
    assert m.group(3) == KEY.split()[1], m.group(0)


@pytest.mark.sectors
def test_bios_gpt_on_a_512e_virtio_disk_boots(make_vm, test_os):
    """512e: 512-byte logical sectors on 4096-byte physical blocks. BIOS boots it (SeaBIOS
    reads 512-byte sectors); every partition starts and ends on a physical block."""
    doc = json.loads((pathlib.Path(__file__).parents[2] / "samples"
                      / "single-disk.json").read_text())
    doc["bootloader"] = {"boot_mode": "bios"}
    with FileServer(test_os) as srv:
        doc = _image_doc(doc, srv, test_os, "root")
        m, _, _, _ = _provision_and_boot(make_vm, doc, "512e virtio GPT BIOS", disks=1,
                                         bus="virtio", block_size=FIVE_12E, firmware="bios")
    assert m.group(1) != "none"


@pytest.mark.sectors
def test_seabios_cannot_boot_a_4kn_disk(tmp_path):
    """Why BIOS boot from a 4Kn disk is refused at plan time: qemu's SeaBIOS (as server
    firmware in legacy mode) does not take a virtio-blk or SCSI disk of 4096-byte sectors as
    a boot disk at all: its debug port says so, and it finds nothing to boot."""
    seabios = tmp_path / "seabios.log"
    debug = ["-chardev", f"file,id=dbg,path={seabios}",
             "-device", "isa-debugcon,iobase=0x402,chardev=dbg"]
    with VM(disks=2, disk_size="64M", bus=["virtio", "scsi"], block_size=FOUR_KN,
            boot="disk", extra_args=debug, name="seabios-4kn") as vm:
        vm.wait_console("No bootable device", timeout=120)
    log = seabios.read_text(errors="replace")
    assert "virtio-blk 00:" in log and "block size 4096 is unsupported" in log, log
    assert "virtio-scsi: unsupported block size 4096" in log, log
    version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "seabios"],
                             capture_output=True, text=True).stdout
    TIMES["SeaBIOS on 4Kn"] = f"SeaBIOS {version}: " + "; ".join(
        line for line in log.splitlines() if "unsupported" in line)


def _disk_image_512(tmp_path):
    """A small whole-disk image made for 512-byte sectors (its GPT header at byte 512, a
    partition from 1 MiB), raw and as qcow2."""
    raw = tmp_path / "disk512.img"
    with open(raw, "wb") as f:
        f.truncate(64 * MiB)
    subprocess.run(["sgdisk", "-n1:2048:0", "-t1:8300", str(raw)], check=True,
                   capture_output=True)
    qcow2 = tmp_path / "disk512.qcow2"
    subprocess.run(["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", str(raw),
                    str(qcow2)], check=True)
    return raw, qcow2


def test_a_512_byte_whole_disk_image_is_refused_on_a_4kn_disk(make_vm, tmp_path):
    """Raw and qcow2: exit 5 with the reason, and not a byte of the image on the disk (it
    cannot boot there: its table would be read at other offsets). CI's one 4Kn case: one
    ramdisk boot, no OS."""
    raw, qcow2 = _disk_image_512(tmp_path)
    vm = make_vm(disks=1, disk_size="1G", block_size=FOUR_KN, firmware="uefi")
    assert vm.read_text("/sys/class/block/vda/queue/logical_block_size").strip() == "4096"
    with FileServer(tmp_path) as srv:
        for image, fmt in ((raw, "disk"), (qcow2, "qcow2")):
            doc = {"version": 1, "disks": [{"id": "d", "match": {"name": "/dev/vda"}}],
                   "images": [{"uri": srv.guest_url(image.name), "format": fmt, "target": "d",
                               "checksum": testos.checksum(image)}],
                   "bootloader": {"type": "image", "boot_mode": "uefi"}}
            run = vm.provision(doc, ["--debug"])
            said = run.stdout + run.stderr
            assert run.returncode == 5, said + run.log
            assert ("its gpt partition table was made for 512-byte sectors, and /dev/vda has "
                    "4096-byte logical sectors") in said, said
            assert "Nothing of it was written" in said, said
            # no byte of the image: the disk reads zeros where its table and partition are
            assert vm.ssh("cmp -n 8388608 /dev/vda /dev/zero", check=False).returncode == 0
            assert vm.ssh(["blkid", "-p", "-s", "PTTYPE", "/dev/vda"],
                          check=False).stdout.strip() == ""
            TIMES[f"512-byte {fmt} image on 4Kn"] = f"exit {run.returncode}: " + next(
                line for line in said.splitlines() if line.startswith("provision: error:"))
