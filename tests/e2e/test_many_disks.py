"""Many disks: a JBOD-style node of 27 SCSI disks on one virtio-scsi HBA, provisioned and booted.

The layout is what a 24-bay storage server with a rear boot pair gets: a RAID1 boot pair
(bios_grub and /boot on md RAID1 on each), RAID10 over the 24 data disks with a 27th disk as
its hot spare, LVM on the RAID10 holding / and a data volume. 27 rather than 26 so that the
kernel's names run past sdz (sdaa): every name, partition name and hint must work there too.
Root lives on the 24-disk array, so the installed system's own initramfs must assemble it
(25 members with the spare) before the boot marker can print; the marker names the chain of
devices under /.

Outside CI (`tox -e e2e-many-disks`, marker `many_disks`): one provision and one boot of 27
disks under TCG take minutes. How discovery, udev settle and md creation grow with the disk
count: benchmarks/many_disks.py.
"""

import re
import time

import pytest

from tests.vmbench import FileServer, testos
from tests.vmbench.vm import scsi_wwn

pytestmark = pytest.mark.many_disks

MARKER = r"PROVISION-BOOT-OK cd=(\S+) mpath=\S+ root=(\S+)"
BOOT = ["BOOT0", "BOOT1"]
DATA = [f"DATA{i:02d}" for i in range(24)]
SPARE = "SPARE0"
SERIALS = BOOT + DATA + [SPARE]     # the boot pair first: the firmware boots the first disks


def _disk(disk_id, serial, partitions):
    # matched by WWN, as a JBOD's disks are told apart (serial is the WWN here too: udev's
    # ID_SERIAL_SHORT of a SCSI disk with a designator is its NAA id, as ironic-python-agent
    # reports it)
    return {"id": disk_id, "match": {"wwn": scsi_wwn(serial)}, "partitions": partitions}


def layout():
    disks = [_disk(f"boot{i}", serial, [
        {"id": f"bios{i}", "size": "1MiB", "type": "bios_grub"},
        {"id": f"bootp{i}", "size": "512MiB", "type": "raid"}]) for i, serial in enumerate(BOOT)]
    disks += [_disk(f"data{i:02d}", serial, [
        {"id": f"d{i:02d}", "size": "remaining", "type": "raid"}]) for i, serial in enumerate(DATA)]
    disks.append(_disk("spare", SPARE, [{"id": "s0", "size": "remaining", "type": "raid"}]))
    return {
        "version": 1,
        "disks": disks,
        "raids": [
            {"id": "md-boot", "name": "boot", "level": 1, "members": ["bootp0", "bootp1"],
             "metadata": "1.0"},
            {"id": "md-data", "name": "data", "level": 10,
             "members": [f"d{i:02d}" for i in range(len(DATA))], "spares": ["s0"]}],
        "volume_groups": [{"id": "vg-jbod", "name": "jbod", "pvs": ["md-data"],
                           "logical_volumes": [
                               {"id": "lv-root", "name": "root", "size": "1536MiB"},
                               {"id": "lv-srv", "name": "srv", "size": "remaining"}]}],
        "filesystems": [
            {"device": "md-boot", "type": "ext2", "mount": "/boot", "label": "boot"},
            {"device": "lv-root", "type": "ext4", "mount": "/", "label": "root"},
            {"device": "lv-srv", "type": "xfs", "mount": "/srv/data", "label": "data"}],
        "bootloader": {"kernel_params": "console=ttyS0"},
        "configdrive": {"format": "config-2", "meta_data": {"uuid": "many-disks-e2e"}},
    }


def _check_inventory(disks):
    """Every disk listed once with the identities hints use; names past sdz."""
    names = [d["name"] for d in disks]
    assert len(disks) == len(SERIALS), names
    assert "/dev/sdaa" in names, names
    assert sorted(d["wwn"] for d in disks) == sorted(scsi_wwn(s) for s in SERIALS)
    for key in ("by_path", "hctl"):
        values = [d[key] for d in disks]
        assert None not in values and len(set(values)) == len(disks), (key, values)


def _members(detail):
    """(active member devices, spare devices) from mdadm --detail's device table."""
    active, spare = [], []
    for line in detail.splitlines():
        m = re.search(r"\s(active sync|spare)\s.*?(/dev/\S+)$", line)
        if m:
            (spare if m.group(1) == "spare" else active).append(m.group(2))
    return active, spare


def test_27_disks_raid10_under_lvm_and_a_raid1_boot_pair_boot(make_vm):
    test_os = testos.build_dir()
    image = test_os / "root.ext4.zst"
    t0 = time.monotonic()
    vm = make_vm(disks=len(SERIALS), disk_size="1G", bus="scsi", serials=SERIALS,
                 keep_disks=True)
    _check_inventory(vm.inventory()["inventory"]["disks"])
    doc = layout()
    with FileServer(test_os) as srv:
        doc["images"] = [{"uri": srv.guest_url(image.name), "format": "raw",
                          "target": "lv-root", "checksum": testos.checksum(image)}]
        run = vm.provision(doc, ["--debug"])
    assert run.returncode == 0, run.log
    detail = vm.mdadm_detail("/dev/md/data")
    assert "Raid Level : raid10" in detail, detail
    active, spare = _members(detail)
    assert len(active) == len(DATA) and len(spare) == 1, (active, spare)
    assert "/dev/sdaa1" in active + spare, (active, spare)
    lvs = {lv["lv_name"]: lv for lv in vm.lvs()}
    assert int(lvs["root"]["lv_size"]) == 1536 << 20, lvs
    assert "initramfs: the image's own is kept" in run.log, run.log
    vm.stop()
    provision_s = time.monotonic() - t0
    t1 = time.monotonic()
    booted = make_vm(disk_images=vm.disk_images, boot="disk", bus="scsi", serials=SERIALS)
    m = booted.wait_console(MARKER, timeout=1800)
    boot_s = time.monotonic() - t1
    vm.keep_disks = False       # proven: the teardown may remove the images now
    chain = m.group(2).split(",")
    # / on the LV, on the RAID10, on a partition of each of the 24 data disks and the spare
    assert any(item.endswith(":raid10") for item in chain), chain
    parts = [item for item in chain if item.endswith(":part")]
    assert len(parts) == len(DATA) + 1, chain
    assert m.group(1) != "none", "the configdrive was not found"
    print(f"many disks: {len(SERIALS)} disks, boot to SSH {vm.boot_seconds:.0f} s, provision "
          f"and power-off {provision_s:.0f} s, boot to marker {boot_s:.0f} s; root chain "
          f"{m.group(2)}")


# A disk arrives and udev has not processed it yet (its rules held back, as they are while a
# shelf of disks is still being probed): inventory must wait for udev, not list the disk
# without the WWN, serial and by-path link hints find it by.
HOLD_UDEV = """set -e
echo 1 > /sys/block/{name}/device/delete
udevadm settle
udevadm control --stop-exec-queue
echo '- - -' > /sys/class/scsi_host/host{host}/scan
for _ in $(seq 50); do [ -e /sys/block/{name} ] && break; sleep 0.2; done
(sleep {hold}; udevadm control --start-exec-queue) >/dev/null 2>&1 &
"""


def test_a_disk_udev_has_not_processed_yet_is_listed_with_its_identity(make_vm):
    serials = ["LATE0", "LATE1", "LATE2"]
    vm = make_vm(disks=len(serials), disk_size="1G", bus="scsi", serials=serials)
    before = {d["wwn"]: d for d in vm.inventory()["inventory"]["disks"]}
    late = before[scsi_wwn("LATE2")]
    name = late["name"].removeprefix("/dev/")
    vm.ssh(["sh", "-c", HOLD_UDEV.format(name=name, host=late["hctl"].split(":")[0], hold=10)])
    t0 = time.monotonic()
    after = vm.inventory()["inventory"]["disks"]
    waited = time.monotonic() - t0
    found = [d for d in after if d["name"] == late["name"]]
    assert len(found) == 1, after
    assert (found[0]["wwn"], found[0]["by_path"]) == (late["wwn"], late["by_path"]), \
        (found[0], waited)
    print(f"many disks: inventory of a disk udev held back 10 s: {waited:.1f} s, "
          f"listed as {found[0]['name']} {found[0]['wwn']} {found[0]['by_path']}")
