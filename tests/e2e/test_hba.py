"""The storage controllers qemu emulates, and devices that are not install targets (issue 53).

One VM with one disk on each HBA (megasas-gen2, mptsas1068, lsi53c895a, AHCI, NVMe, pvscsi),
a USB stick (qemu's usb-storage, which does not flag itself removable: its transport says
what it is), a read-only disk and a BMC-style virtual-media CD-ROM with an ISO in it.
`provision inventory` lists each disk with its controller, by-path and SCSI address; a layout
names each disk by another kind of hint and puts a partition and a filesystem on each, read
back; a size rule and the default `pick: smallest` never choose the stick, the read-only disk
or the CD-ROM, whose bytes are unchanged at the end. `tox -e e2e-hba` (outside CI).
"""

import hashlib
import json
import os
import subprocess

import pytest

pytestmark = pytest.mark.hba

# bus (tests/vmbench/vm.py HBA_MODELS) -> the kernel driver that must bind its controller
DRIVERS = {"megasas": "megaraid_sas", "mptsas": "mptsas", "lsi": "sym53c8xx",
           "ahci": "ahci", "nvme": "nvme", "pvscsi": "vmw_pvscsi"}
# the hint kind that names each one in the layout
HINT = {"megasas": "by_path", "mptsas": "wwn", "lsi": "hctl", "ahci": "serial",
        "nvme": "name", "pvscsi": "by_id"}
SIZES = {"megasas": "2G", "mptsas": "3G", "lsi": "3G", "ahci": "3G", "nvme": "3G",
         "pvscsi": "3G", "usb": "1G"}
BUSES = list(DRIVERS) + ["usb"]


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _scribble(path, size):
    """Random bytes at both ends: what the stick and the read-only disk must keep."""
    with open(path, "wb") as f:
        f.truncate(size)
        f.write(os.urandom(1 << 20))
        f.seek(size - (1 << 20))
        f.write(os.urandom(1 << 20))


@pytest.fixture(scope="module")
def extras(tmp_path_factory):
    """A read-only disk image and a virtual-media ISO, as qemu arguments, and the files."""
    work = tmp_path_factory.mktemp("hba")
    ro = work / "readonly.img"
    _scribble(ro, 1 << 30)
    (work / "iso").mkdir()
    (work / "iso" / "README").write_text("virtual media\n")
    iso = work / "vmedia.iso"
    subprocess.run(["genisoimage", "-quiet", "-V", "PA-VMEDIA", "-o", str(iso),
                    str(work / "iso")], check=True)
    args = ["-drive", f"file={ro},format=raw,if=none,id=ro0,readonly=on",
            "-device", "virtio-blk-pci,drive=ro0,serial=PA-RO",
            "-drive", f"file={iso},format=raw,if=none,id=cd0,media=cdrom,readonly=on",
            "-device", "ahci,id=vmedia", "-device", "ide-cd,drive=cd0,bus=vmedia.0"]
    return args, {p: _sha256(p) for p in (ro, iso)}


@pytest.fixture(scope="module")
def vm(ramdisk, extras, request):
    from tests.vmbench import VM
    args, _ = extras
    with VM(disks=[SIZES[b] for b in BUSES], bus=BUSES, ramdisk=ramdisk, name="hba",
            serials=[f"PA-{b.upper()}" for b in BUSES], extra_args=args) as machine:
        yield machine


@pytest.fixture(scope="module")
def inventory(vm):
    inv = vm.inventory()["inventory"]
    print(json.dumps(inv, indent=1))
    return inv


def _by_serial(inventory):
    """{the serial the VM gave: disk}. A SCSI disk with a WWN reports its WWN as serial (udev's
    ID_SERIAL_SHORT, as ironic-python-agent reads it too); its by-id links keep the other."""
    found = {}
    for d in inventory["disks"]:
        given = [link.rsplit("_", 1)[-1] for link in d["by_id"] if "/scsi-0" in link]
        found[d["serial"] if d["serial"].startswith("PA-") else given[0]] = d
    return found


def test_inventory_lists_each_hba_disk_with_its_controller_path_and_address(inventory):
    disks = _by_serial(inventory)
    for bus, driver in DRIVERS.items():
        d = disks.get(f"PA-{bus.upper()}")
        assert d, f"no disk on {bus} ({driver}) in {sorted(disks)}"
        assert d["controller"] == driver, (bus, d)
        assert d["by_path"] and d["by_path"].startswith("/dev/disk/by-path/pci-"), (bus, d)
        if bus == "nvme":
            assert d["tran"] == "nvme" and d["name"] == "/dev/nvme0n1"
        else:
            assert d["hctl"] and d["name"].startswith("/dev/sd"), (bus, d)
        if bus in ("megasas", "mptsas", "lsi", "pvscsi"):
            assert d["wwn"], (bus, d)       # scsi-hd's wwn= (tests/vmbench/vm.py scsi_wwn)
    assert disks["PA-AHCI"]["tran"] == "sata" and disks["PA-MPTSAS"]["tran"] == "sas"


def test_inventory_shows_the_stick_the_read_only_disk_and_the_cdrom_as_what_they_are(inventory):
    disks = _by_serial(inventory)
    assert disks["PA-USB"]["tran"] == "usb" and disks["PA-USB"]["controller"] == "xhci_hcd"
    assert disks["PA-RO"]["read_only"] is True
    (cd,) = inventory["optical_drives"]
    assert cd["type"] == "cdrom" and cd["label"] == "PA-VMEDIA" and cd["read_only"]
    assert cd["controller"] == "ahci" and cd["size"] > 0
    assert not any(d["name"].startswith("/dev/sr") for d in inventory["disks"])


def _one_disk(match, **extra):
    return {"version": 1,
            "disks": [dict({"id": "d", "match": match, "table": "gpt",
                            "partitions": [{"id": "p", "size": "remaining", "type": "linux"}]},
                           **extra)],
            "filesystems": [{"device": "p", "type": "ext4", "mount": "/"}]}


def test_pick_smallest_and_a_size_rule_never_choose_the_stick_or_the_read_only_disk(vm,
                                                                                   inventory):
    smallest = _by_serial(inventory)["PA-MEGASAS"]["name"]      # 2 GiB; the stick has 1
    run = vm.provision(_one_disk({"size": ">= 1"}, pick="smallest"), ["--dry_run"])
    assert run.returncode == 0, run.stderr
    line = next(line for line in run.stdout.splitlines() if "matched by" in line)
    assert line.startswith(smallest) and "left out:" in line, line
    for serial in ("PA-USB", "PA-RO"):
        assert _by_serial(inventory)[serial]["name"] in line, line
    run = vm.provision(_one_disk({"size": "<= 1"}), ["--dry_run"])    # the stick and the ro disk
    assert run.returncode == 3, run.stdout
    assert "no program picks by itself" in run.stderr, run.stderr
    for serial in ("PA-USB", "PA-RO"):
        assert _by_serial(inventory)[serial]["name"] in run.stderr, run.stderr


def _hint(disk, kind):
    if kind == "by_id":
        return next(link for link in disk["by_id"] if "/scsi-" in link)
    return disk[kind]


def test_a_layout_names_each_disk_by_another_hint_and_is_built_on_each(vm, inventory, extras):
    disks = _by_serial(inventory)
    layout = {"version": 1, "disks": [], "filesystems": []}
    for bus, kind in HINT.items():
        layout["disks"].append({"id": bus, "match": {kind: _hint(disks[f"PA-{bus.upper()}"],
                                                                 kind)},
                                "table": "gpt",
                                "partitions": [{"id": f"{bus}-p", "size": "remaining",
                                                "type": "linux"}]})
        layout["filesystems"].append({"device": f"{bus}-p", "type": "ext4", "label": bus,
                                      "mount": "/" if bus == "megasas" else f"/srv/{bus}"})
    stick = disks["PA-USB"]["name"]
    vm.ssh(f"head -c 1M /dev/urandom > {stick} && sync")
    ends = f"{{ head -c 1M {stick}; tail -c 1M {stick}; }} | sha256sum"
    stick_before = vm.ssh(ends).stdout
    run = vm.provision(layout)
    assert run.returncode == 0, run.log
    # provision logs the plan it carries out (its stdout is the run's summary): each disk's
    # line names the device the hint found and the hint, e.g. "/dev/sdb  2.0GiB  gpt ...
    # (disk megasas, matched by by_path='/dev/disk/by-path/pci-...')"
    planned = {line.split()[0]: line for line in run.log.splitlines()
               if "(disk " in line and ", matched by " in line}
    for bus, kind in HINT.items():
        disk = disks[f"PA-{bus.upper()}"]
        line = planned.get(disk["name"], "")
        assert f"(disk {bus}, matched by {kind}={_hint(disk, kind)!r})" in line, (bus, planned)
    labels = {dev: tags.get("LABEL") for dev, tags in vm.blkid().items()}
    for bus in HINT:
        name = disks[f"PA-{bus.upper()}"]["name"]
        part = name + ("p1" if name.startswith("/dev/nvme") else "1")
        assert labels.get(part) == bus, (bus, part, labels)
    # nothing else changed: the stick (read in the guest), the read-only disk and the ISO
    # behind the CD-ROM (read on the host once qemu closed them)
    assert vm.ssh(ends).stdout == stick_before
    vm.stop()
    assert {p: _sha256(p) for p in extras[1]} == extras[1]
