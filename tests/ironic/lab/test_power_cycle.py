"""The product's first sentence, end to end: Ironic powers the machine through its BMC,
network-boots our ramdisk with its own boot interface and DHCP, `provision` builds the layout
over SSH, Ironic boots the installed system from disk, and cleaning wipes the disks again.

Everything is real: Ironic 39 (API + conductor), a libvirt domain (qemu TCG) powered and
switched between network and disk boot by sushy-tools' Redfish emulator, iPXE from qemu's NIC
ROM (BIOS) or OVMF's PXE chain-loading snponly.efi over TFTP (UEFI), Ironic's `dnsmasq` DHCP
provider writing the host and option files of the lab's dnsmasq, our ramdisk found by its
lookup/heartbeat, the test OS (tests/images/build-debian.sh) written onto the layout and booted
to its marker on the serial console, then undeploy and automated cleaning with our
erase_devices_metadata step, the disks read back blank from the host.

The cycle, per firmware: enroll → manage → provide → deploy → instance boot marker →
undeploy → cleaning → available. Phase times are printed. Provide skips automated cleaning
(the node's automated_clean, Ironic's skip_automated_cleaning): on the lab's blank disks it
proved nothing the undeploy's cleaning does not, and took 100-110 s of CI's time on the slower
host; the undeploy cleans (automated_clean is turned on after provide).
Both machines go through it at the same time, as one conductor deploys several nodes (and the
2-core CI host does two 1-vCPU machines in the time of one: see tests/e2e/conftest.py).
"""

import concurrent.futures
import json
import subprocess
import time

import pytest

from tests.ironic.lab import env as lablib
from tests.vmbench import ensure_ramdisk, images

DEPLOY_TIMEOUT = 1200
FIRMWARES = ("bios", "uefi")
TIMES = {}


@pytest.fixture(scope="module")
def lab(test_os):
    ramdisk = ensure_ramdisk()
    opts = lablib.provision_opts(DEPLOY_TIMEOUT)
    with lablib.Lab(lablib.workdir(), ramdisk, {fw: fw for fw in FIRMWARES},
                    opts, serve_dir=test_os, glance=True, cpus=1) as the_lab:
        yield the_lab
    print()
    for case, phases in TIMES.items():
        print(f"power cycle {case}: " + ", ".join(f"{k.strip()} {v:.0f} s"
                                                   for k, v in phases.items()))
    # kept with the lab's logs: CI's quiet pytest output does not show the print
    lablib.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (lablib.ARTIFACTS / "power-cycle-times.json").write_text(json.dumps(
        {case: {k.strip(): round(v, 1) for k, v in phases.items()}
         for case, phases in TIMES.items()}, indent=1) + "\n")


def _wait(lab, uuid, states, timeout):
    return lablib.wait_state(lab.ironic, uuid, states, timeout)


@pytest.fixture(scope="module")
def cycles(lab, test_os):
    """Both cycles at once; what each raised (None when it passed), by firmware."""
    with concurrent.futures.ThreadPoolExecutor(len(FIRMWARES)) as pool:
        running = {fw: pool.submit(_cycle, lab, test_os, fw) for fw in FIRMWARES}
    return {fw: future.exception() for fw, future in running.items()}


@pytest.mark.parametrize("firmware", FIRMWARES)
def test_power_network_boot_deploy_boot_and_clean(cycles, firmware):
    if cycles[firmware] is not None:
        raise cycles[firmware]      # with the traceback from inside its cycle


def _cycle(lab, test_os, firmware):
    dom = lab.domains[firmware]
    times = TIMES.setdefault(firmware, {})
    t = time.monotonic()
    uuid = lab.enroll(firmware, provide_timeout=DEPLOY_TIMEOUT, first_cleaning=False)
    times["enroll+provide"] = time.monotonic() - t
    assert lab.ironic.node(uuid)["automated_clean"] is True

    info = lablib.instance_info(lab, test_os, firmware)
    if firmware == "uefi":
        # As Nova gives it: a Glance image UUID, no URL, no checksum; Ironic caches the image
        # and serves it from http_root, Glance's sha512 goes to provision.
        image = lab.glance.create_image(test_os / "root.ext4.zst", "test-os-root")
        for key in ("image_os_hash_algo", "image_os_hash_value"):
            del info[key]
        info["image_source"] = image["id"]
    lablib.set_instance_info(lab.ironic, uuid, info)
    console_at = len(dom.console_text())
    t, requested = time.monotonic(), time.time()
    lab.ironic.set_state(uuid, "active")
    node = _wait(lab, uuid, ["active"], DEPLOY_TIMEOUT + 120)
    times["deploy to active"] = time.monotonic() - t
    active = time.time()
    dii = node["driver_internal_info"]
    assert dii["provision_exit_code"] == 0 and node["last_error"] is None
    # Inside "deploy to active", from provision's own event times (ramdisk clock = host's:
    # one machine): power on, network boot, heartbeat and SSH, then provision, then the
    # conductor's reboot to disk.
    stamps = [e["time"] for e in dii["provision_events"] if "time" in e]
    times["  power on to provision started"] = stamps[0] - requested
    times["  provision"] = stamps[-1] - stamps[0]
    times["  provision done to active"] = active - stamps[-1]

    # The ramdisk was network-booted by Ironic and found through its heartbeat at the address
    # the lab's dnsmasq leased from the host and option files Ironic's provider wrote (the
    # lab's dnsmasq gives unknown MACs nothing).
    leased = lab.net.leased_address(dom.mac)
    assert leased and dii["provision_ssh_address"] == leased, (leased, dii)
    host_file = lab.net.hostsdir / f"ironic-{dom.mac}.conf"
    assert host_file.read_text().startswith(f"{dom.mac},set:"), host_file.read_text()
    assert "boot.ipxe" in (lab.net.optsdir / f"ironic-{uuid}.conf").read_text()
    assert "boot.ipxe" in " ".join(lab.http.requested), lab.http.requested
    assert f"/{uuid}/" in " ".join(lab.http.requested)     # the node's kernel and ramdisk
    if firmware == "uefi":
        assert f"/agent_images/{uuid}" in " ".join(lab.http.requested), lab.http.requested
    else:
        assert "root.ext4.zst" in " ".join(lab.images.requested)
    # The key the heartbeat reported and the conductor pinned is the one this boot of the
    # ramdisk made and printed on its console.
    printed = lablib.HOST_KEY_LINE.findall(dom.console_text()[console_at:])
    assert printed and dii["provision_host_key"] == printed[-1], (printed, dii)
    done = [e["kind"] for e in dii["provision_events"]
            if e["event"] == "step" and e["status"] == "done"]
    for kind in ("write_image", "bootloader", "configdrive", "fstab"):
        assert kind in done, (kind, done)

    # Ironic set the boot device to disk and powered the machine on: the installed system
    # boots to its marker and sees its configdrive.
    t = time.monotonic()
    m = dom.wait_console(lablib.MARKER, 900, since=console_at)
    times["instance boot to marker"] = time.monotonic() - t
    assert m.group(1) != "none", "the installed system did not find its configdrive"
    tables = {path: images.partition_table(path) for path in dom.disk_images}
    assert tables[dom.disk_images[0]], "no partition table on the first disk after deploy"
    parts = {path: images.probe_partitions(path) for path in dom.disk_images}
    assert any(tags for found in parts.values() for _p, tags in found), parts

    # Undeploy: power off, automated cleaning with our erase step, available.
    t = time.monotonic()
    lab.ironic.set_state(uuid, "deleted")
    node = _wait(lab, uuid, ["available"], DEPLOY_TIMEOUT + 120)
    times["undeploy + cleaning to available"] = time.monotonic() - t
    assert dom.state() == "shut off"
    # undeploy's clean_up had Ironic's provider ignore the MAC; cleaning's boot tagged it again
    assert f"{dom.mac},ignore" in lab.ironic.log_text() and host_file.exists()
    steps = [e for e in node["driver_internal_info"].get("provision_events", [])
             if e["event"] == "step"]
    assert [e["status"] for e in steps if e["kind"] == "erase_metadata"].count("done") == 2
    for path in dom.disk_images:
        assert images.partition_table(path) is None, (path, images.partition_table(path))
        left = subprocess.run(["wipefs", "--no-act", "--noheadings", str(path)],
                              capture_output=True, text=True, check=True).stdout
        assert not left.strip(), (path, left)
        # What the tables used to point at: no md superblock, LVM label or filesystem left.
        for part, _tags in parts[path]:
            unit = 512
            assert images.probe(path, part["start"] * unit, part["size"] * unit) == {}, part
    print(f"\n{firmware}: " + ", ".join(f"{k.strip()} {v:.0f} s" for k, v in times.items()))
