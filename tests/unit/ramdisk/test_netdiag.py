"""When no NIC got an address, /init lists the PCI network devices with the driver bound to
each (ramdisk/netdiag.sh, run here with sh as /init sources it, over a fake sysfs tree)."""

import subprocess

from tests.unit.helpers import REPO

RAMDISK = REPO / "ramdisk"


def _sh(script, *args, stdin=None):
    return subprocess.run(["sh", "-c", ". ./netdiag.sh; " + script, "sh", *args],
                          capture_output=True, text=True, check=True, cwd=RAMDISK,
                          input=stdin).stdout


def _pci(sys, slot, cls, vendor, device, driver=None, iface=None, carrier=None):
    d = sys / "bus/pci/devices" / slot
    d.mkdir(parents=True)
    for name, value in (("class", cls), ("vendor", vendor), ("device", device)):
        (d / name).write_text(value + "\n")
    if driver:
        (sys / "bus/pci/drivers" / driver).mkdir(parents=True, exist_ok=True)
        (d / "driver").symlink_to(sys / "bus/pci/drivers" / driver)
    if iface:
        (d / "net" / iface).mkdir(parents=True)
        (sys / "class/net" / iface).mkdir(parents=True)
        if carrier is not None:
            (sys / "class/net" / iface / "carrier").write_text(f"{carrier}\n")


def test_each_network_device_with_its_driver_or_none(tmp_path):
    sys = tmp_path / "sys"
    _pci(sys, "0000:00:03.0", "0x020000", "0x15ad", "0x07b0")          # vmxnet3, no driver
    _pci(sys, "0000:00:04.0", "0x020000", "0x8086", "0x1572", driver="i40e",
         iface="enp0s4", carrier=0)
    _pci(sys, "0000:00:05.0", "0x010802", "0x1b36", "0x0010", driver="nvme")   # not a NIC
    _pci(sys, "0000:00:06.0", "0x028000", "0x8086", "0x2723")          # another 0x02 subclass
    out = _sh('nic_report "$1"', str(sys)).splitlines()
    assert out == [
        "0000:00:03.0 15ad:07b0 driver=none (no driver for it in this ramdisk: "
        "ramdisk/README.md, Hardware)",
        "0000:00:04.0 8086:1572 driver=i40e iface=enp0s4 carrier=0",
        "0000:00:06.0 8086:2723 driver=none (no driver for it in this ramdisk: "
        "ramdisk/README.md, Hardware)",
    ]


def test_no_network_device_at_all(tmp_path):
    sys = tmp_path / "sys"
    _pci(sys, "0000:00:05.0", "0x010802", "0x1b36", "0x0010", driver="nvme")
    assert _sh('nic_report "$1"', str(sys)) == "no PCI network device found\n"


def test_firmware_failures_from_the_kernel_log():
    log = ("[    3.101] bnx2x 0000:03:00.0: Direct firmware load for bnx2x/bnx2x-e2-7.13.21.0.fw "
           "failed with error -2\n"
           "[    3.200] e1000e 0000:00:19.0 eth0: registered PHC clock\n"
           "[    3.300] ice 0000:3b:00.0: The DDP package file was not found or could not be "
           "read. Entering Safe Mode\n"
           "[    3.400] r8169 0000:02:00.0: firmware: failed to load rtl_nic/rtl8168h-2.fw (-2)\n")
    assert _sh("firmware_failures", stdin=log).splitlines() == [
        "bnx2x 0000:03:00.0: Direct firmware load for bnx2x/bnx2x-e2-7.13.21.0.fw failed "
        "with error -2",
        "ice 0000:3b:00.0: The DDP package file was not found or could not be read. "
        "Entering Safe Mode",
        "r8169 0000:02:00.0: firmware: failed to load rtl_nic/rtl8168h-2.fw (-2)",
    ]


def test_init_reports_when_no_nic_got_an_address():
    init = (RAMDISK / "init").read_text()
    assert ". /usr/lib/provision/netdiag.sh" in init
    assert "nic_report" in init and "firmware_failures" in init
    project = (RAMDISK / "build-project.sh").read_text()
    assert '"$here/netdiag.sh" "$stage/usr/lib/provision/netdiag.sh"' in project
