"""Server NICs: the ramdisk carries every Ethernet driver of its kernel and the firmware files
they name (ramdisk/build-base.sh), reaches SSH over each NIC model qemu emulates besides virtio,
and says on the console which NIC has no driver when none got an address (ramdisk/netdiag.sh).

The inventory check rides on the shared VM (CI); one boot per NIC model is `tox -e e2e-nics`
(outside CI: 7 boots of 35-45 s under TCG)."""

import re

import pytest

from tests.vmbench.vm import VM

# The families real servers and cloud bare metal ship (issue 53), by the module that binds them.
SERVER_NIC_MODULES = [
    "igb", "igc", "ixgbe", "i40e", "ice", "bnxt_en", "tg3", "bnx2", "bnx2x", "mlx4_en",
    "mlx5_core", "qede", "be2net", "enic", "sfc", "nfp", "ena", "gve", "mana", "vmxnet3",
    # and what qemu emulates, proven by booting below
    "e1000", "e1000e", "e100", "8139cp", "8139too", "tulip", "virtio_net",
]

# Firmware files a module of the ramdisk names (modinfo -F firmware) that Debian bookworm's
# firmware packages (20230210-5: firmware-misc-nonfree, -netronome, ...) do not ship.
NOT_IN_DEBIAN = {
    "acenic/tg1.bin": "acenic (Alteon AceNIC, 1990s gigabit): licence forbids redistribution",
    "acenic/tg2.bin": "acenic, as above",
    "adaptec/starfire_rx.bin": "starfire (Adaptec ANA-6915, 2000): not in linux-firmware's "
                               "redistributable set Debian packages",
    "adaptec/starfire_tx.bin": "starfire, as above",
    "sun/cassini.bin": "cassini (Sun GigaSwift, SPARC era): likewise",
    "netronome/nic_AMDA0058-0011_2x40.nffw": "nfp: Agilio boards whose images Netronome never "
                                             "published in linux-firmware",
    "netronome/nic_AMDA0058-0012_2x40.nffw": "nfp, as above",
    "netronome/nic_AMDA0099-0001_1x10_1x25.nffw": "nfp, as above",
    # storage HBAs' files
    "aic94xx-seq.fw": "aic94xx (Adaptec AIC-94xx SAS, 2005): Adaptec's sequencer, not in "
                      "linux-firmware",
    "isci/isci_firmware.bin": "isci (Intel C600 SAS): optional OEM parameters; the driver uses "
                              "its built-in defaults without them",
    "wd719x-risc.bin": "wd719x (Western Digital WD7193/7197/7296 SCSI, 1990s): not in "
                       "linux-firmware",
    "wd719x-wcs.bin": "wd719x, as above",
}

# One modinfo over every module (a process per module took 130 s under TCG), then the
# shell's own test for each name.
FIRMWARE_CHECK = r"""
find /lib/modules/$(uname -r) -name '*.ko*' -print0 | xargs -0 modinfo -F firmware | sort -u \
  | while read -r f; do
      if [ -e "/lib/firmware/$f" ]; then echo "present $f"; else echo "missing $f"; fi
    done
"""


def test_server_nic_drivers_and_their_firmware_are_in_the_ramdisk(shared_vm):
    out = shared_vm.ssh(["sh", "-c", "for m in \"$@\"; do modinfo -F filename \"$m\" "
                         "|| echo \"NO MODULE $m\"; done", "sh", *SERVER_NIC_MODULES])
    assert "NO MODULE" not in out.stdout, out.stdout
    assert len(out.stdout.split()) == len(SERVER_NIC_MODULES)
    listed = shared_vm.ssh(["sh", "-c", FIRMWARE_CHECK]).stdout.split("\n")
    present = {line.split(" ", 1)[1] for line in listed if line.startswith("present ")}
    missing = {line.split(" ", 1)[1] for line in listed if line.startswith("missing ")}
    assert missing == set(NOT_IN_DEBIAN), missing ^ set(NOT_IN_DEBIAN)
    # the drivers servers need firmware for, each with its files
    for wanted in ("bnx2x/bnx2x-e2-7.13.21.0.fw", "tigon/tg3.bin", "intel/ice/ddp/ice.pkg",
                   "qed/qed_init_values_zipped-8.59.1.0.bin", "rtl_nic/rtl8168h-2.fw",
                   "bnx2/bnx2-mips-09-6.2.1b.fw", "e100/d102e_ucode.bin"):
        assert wanted in present, wanted
    # nothing else: the firmware packages' hundreds of other files stay out of the ramdisk
    extra = shared_vm.ssh(["sh", "-c", "cd /lib/firmware && find . -type f | wc -l"])
    assert int(extra.stdout) == len(present)


# qemu's NIC model -> the driver that binds it in the ramdisk's kernel
NIC_MODELS = {
    "e1000": "e1000", "e1000e": "e1000e", "vmxnet3": "vmxnet3", "rtl8139": "8139cp",
    "tulip": "tulip", "i82559er": "e100",
}


@pytest.mark.nics
@pytest.mark.parametrize("model", sorted(NIC_MODELS))
def test_ssh_over_each_emulated_nic(make_vm, model):
    vm = make_vm(disks=1, disk_size="1G", nic=model)
    iface = vm.ssh("ip -4 -o addr show scope global | awk '{print $2; exit}'").stdout.strip()
    assert iface, vm.console_tail()
    driver = vm.ssh(f"basename $(readlink /sys/class/net/{iface}/device/driver)").stdout.strip()
    assert driver == NIC_MODELS[model]
    assert "NO NETWORK" not in vm.console_text()


@pytest.mark.nics
def test_a_nic_without_its_driver_is_named_on_the_console(ramdisk):
    """vmxnet3's driver kept from loading: the console says no NIC got an address and lists
    the device (VMware's 15ad:07b0) with no driver, instead of a READY line and silence.
    Started by hand: entering the VM would wait for an SSH that cannot come."""
    vm = VM(disks=1, disk_size="1G", nic="vmxnet3", name="nic-no-driver", ramdisk=ramdisk,
            append="modprobe.blacklist=vmxnet3")
    try:
        vm.start()
        vm.wait_console(re.escape("PROVISION-RAMDISK READY"))
        console = vm.console_text()
    except BaseException:
        vm.report_failure()
        raise
    finally:
        vm.close()
    assert "NO NETWORK: no NIC got an address" in console, console[-3000:]
    assert re.search(r"15ad:07b0 driver=none \(no driver for it in this ramdisk", console)
