"""Discovery maps udev's view of a disk to ironic-python-agent's inventory fields."""

from provision_agent.drivers import discovery


class FakeDevice(dict):
    def __init__(self, sys_name, props, attrs, links=(), scsi=None, sys_path=None):
        super().__init__(props)
        self.sys_name = sys_name
        self.sys_path = sys_path or f"/nonexistent/{sys_name}"
        self.device_node = f"/dev/{sys_name}"
        self.attributes = {k: v.encode() for k, v in attrs.items()}
        self.device_links = list(links)
        self._scsi = scsi

    def find_parent(self, subsystem):
        return self._scsi


class FakeContext:
    def __init__(self, devices):
        self.devices = devices

    def list_devices(self, **kw):
        return iter(self.devices)


def disk(name, sectors="8388608", sys_path=None, links=None, **props):
    base = {"DEVTYPE": "disk", "ID_MODEL": "QEMU_HARDDISK", "ID_SERIAL_SHORT": f"S-{name}"}
    base.update(props)
    return FakeDevice(name, base, {"size": sectors, "queue/rotational": "1", "removable": "0",
                                   "ro": "0"},
                      links=links or [f"/dev/disk/by-path/pci-0000:00:0{len(name)}.0",
                                      f"/dev/disk/by-id/virtio-S-{name}"],
                      sys_path=sys_path)


def test_disks_with_ipa_fields_and_non_disks_left_out():
    scsi = type("P", (), {"sys_name": "0:0:0:0"})()
    devices = [disk("vdb", ID_WWN="0x5000c500a1b2c3d4"), disk("vda"),
               disk("loop0"), disk("sr0"), disk("md127"), disk("dm-0"),
               disk("vdc", sectors="0"),
               FakeDevice("vda1", {"DEVTYPE": "partition"}, {"size": "2048"})]
    devices[1]._scsi = scsi
    found = discovery.discover_disks(FakeContext(devices))
    assert [d["name"] for d in found] == ["/dev/vda", "/dev/vdb"]
    vda, vdb = found
    assert vda["size"] == 4 << 30
    assert vda["serial"] == "S-vda" and vda["model"] == "QEMU_HARDDISK"
    assert vda["rotational"] is True and vda["removable"] is False
    assert vda["hctl"] == "0:0:0:0" and vdb["hctl"] is None
    assert vda["by_path"].startswith("/dev/disk/by-path/")
    assert vda["by_id"] == ["/dev/disk/by-id/virtio-S-vda"]
    assert vdb["wwn"] == "0x5000c500a1b2c3d4"


WWID = "35979ac49e6cbd706"


def test_multipath_disk_listed_once_with_its_paths(tmp_path):
    """Two SCSI paths held by one dm-multipath map (what the VM bench's qemu shows): one disk,
    named after the map, identity from the paths, the paths' by-path links under multipath."""
    def sys_dir(name, holders=()):
        (tmp_path / name / "holders").mkdir(parents=True)
        for h in holders:
            (tmp_path / name / "holders" / h).touch()
        return str(tmp_path / name)

    paths = []
    for name, hba in (("sda", "03"), ("sdb", "04")):
        d = disk(name, sys_path=sys_dir(name, ["dm-0"]), ID_SERIAL_SHORT=WWID[1:],
                 ID_WWN="0x" + WWID[1:],
                 links=[f"/dev/disk/by-path/pci-0000:00:{hba}.0-scsi-0:0:0:0",
                        "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_mp0"])
        d._scsi = type("P", (), {"sys_name": f"{int(hba) - 1}:0:0:0"})()
        paths.append(d)
    mpath = disk("dm-0", sys_path=sys_dir("dm-0"), DM_UUID=f"mpath-{WWID}", DM_NAME="mpatha",
                 links=[f"/dev/disk/by-id/dm-uuid-mpath-{WWID}", "/dev/disk/by-id/dm-name-mpatha",
                        f"/dev/disk/by-id/wwn-0x{WWID[1:]}", "/dev/mapper/mpatha"])
    other = disk("dm-1", DM_UUID="LVM-abc", DM_NAME="os-root")
    found = discovery.discover_disks(FakeContext([paths[0], disk("vda"), mpath, other, paths[1]]))
    assert [d["name"] for d in found] == ["/dev/mapper/mpatha", "/dev/vda"]
    mp = found[0]
    assert mp["size"] == 4 << 30 and mp["wwn"] == "0x" + WWID[1:] and mp["serial"] == WWID[1:]
    assert mp["by_path"] is None and mp["hctl"] is None
    assert f"/dev/disk/by-id/dm-uuid-mpath-{WWID}" in mp["by_id"]
    assert "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_mp0" in mp["by_id"]
    assert mp["multipath"]["wwid"] == WWID and mp["multipath"]["dm"] == "/dev/dm-0"
    assert mp["multipath"]["paths"] == [
        {"name": "/dev/sda", "by_path": "/dev/disk/by-path/pci-0000:00:03.0-scsi-0:0:0:0",
         "hctl": "2:0:0:0"},
        {"name": "/dev/sdb", "by_path": "/dev/disk/by-path/pci-0000:00:04.0-scsi-0:0:0:0",
         "hctl": "3:0:0:0"}]


def test_block_sizes_are_recorded_as_sysfs_says():
    """sysfs `size` counts 512-byte units at any sector size; the block sizes are recorded so
    that a plan made from the inventory writes the table in the disk's own sectors."""
    fourkn, e512 = disk("sda", sectors="8388608"), disk("sdb")
    fourkn.attributes.update({"queue/logical_block_size": b"4096",
                              "queue/physical_block_size": b"4096"})
    e512.attributes.update({"queue/logical_block_size": b"512",
                            "queue/physical_block_size": b"4096"})
    sda, sdb = discovery.discover_disks(FakeContext([fourkn, e512]))
    assert sda["size"] == 4 << 30
    assert (sda["logical_block_size"], sda["physical_block_size"]) == (4096, 4096)
    assert (sdb["logical_block_size"], sdb["physical_block_size"]) == (512, 4096)


class Parent:
    def __init__(self, sys_name=None, driver=None):
        self.sys_name, self.driver = sys_name, driver


def test_transport_and_controller_say_what_a_disk_is_behind():
    """A USB disk that does not flag itself removable is told by its transport; the HBA by its
    PCI device's driver."""
    pci = "/sys/devices/pci0000:00/0000:00:05.0"
    usb = disk("sda", sys_path=f"{pci}/usb2/2-1/2-1:1.0/host3/target3:0:0/3:0:0:0/block/sda",
               ID_BUS="usb")
    sas = disk("sdb", sys_path=f"{pci}/host2/port-2:0/end_device-2:0/target2:0:0/2:0:0:0/"
                               "block/sdb", ID_BUS="scsi")
    sata = disk("sdc", sys_path=f"{pci}/ata1/host0/target0:0:0/0:0:0:0/block/sdc", ID_BUS="ata")
    vd = disk("vda", sys_path=f"{pci}/virtio1/block/vda")
    nvme = disk("nvme0n1", sys_path=f"{pci}/nvme/nvme0/nvme0n1")
    other = disk("sdd", sys_path=f"{pci}/host4/target4:0:0/4:0:0:0/block/sdd", ID_BUS="scsi")
    for d in (usb, sas, sata, other):
        d._scsi = Parent("0:0:0:0", driver="mptsas")
    found = {d["name"]: d for d in discovery.discover_disks(
        FakeContext([usb, sas, sata, vd, nvme, other]))}
    assert {n: d["tran"] for n, d in found.items()} == {
        "/dev/sda": "usb", "/dev/sdb": "sas", "/dev/sdc": "sata", "/dev/vda": "virtio",
        "/dev/nvme0n1": "nvme", "/dev/sdd": None}
    assert found["/dev/sdb"]["controller"] == "mptsas" and found["/dev/vda"]["controller"] is None


def test_optical_drives_are_listed_apart_as_read_only_removable_cdroms():
    cd = FakeDevice("sr0", {"DEVTYPE": "disk", "ID_MODEL": "QEMU_DVD-ROM",
                            "ID_FS_LABEL": "VMEDIA_BOOT_ISO"}, {"size": "4096"},
                    links=["/dev/disk/by-path/pci-0000:00:1f.2-ata-2"],
                    scsi=Parent("1:0:0:0", driver="ahci"))
    context = FakeContext([cd, disk("vda")])
    assert [d["name"] for d in discovery.discover_disks(context)] == ["/dev/vda"]
    (found,) = discovery.discover_optical(context)
    assert found["name"] == "/dev/sr0" and found["type"] == "cdrom"
    assert found["read_only"] and found["removable"] and found["size"] == 2 << 20
    assert found["label"] == "VMEDIA_BOOT_ISO" and found["hctl"] == "1:0:0:0"
    assert found["by_path"] == "/dev/disk/by-path/pci-0000:00:1f.2-ata-2"
