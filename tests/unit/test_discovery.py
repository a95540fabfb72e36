"""Discovery maps udev's view of a disk to ironic-python-agent's inventory fields."""

from provision_agent.drivers import discovery


class FakeDevice(dict):
    def __init__(self, sys_name, props, attrs, links=(), scsi=None):
        super().__init__(props)
        self.sys_name = sys_name
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


def disk(name, sectors="8388608", **props):
    base = {"DEVTYPE": "disk", "ID_MODEL": "QEMU_HARDDISK", "ID_SERIAL_SHORT": f"S-{name}"}
    base.update(props)
    return FakeDevice(name, base, {"size": sectors, "queue/rotational": "1", "removable": "0",
                                   "ro": "0"},
                      links=[f"/dev/disk/by-path/pci-0000:00:0{len(name)}.0",
                             f"/dev/disk/by-id/virtio-S-{name}"])


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
