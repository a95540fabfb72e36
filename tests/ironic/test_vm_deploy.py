"""A real Ironic deploys the qemu VM that runs our ramdisk, and the layout is really built.

What is real: Ironic 39 (API + conductor, as in test_integration.py), our `provision` deploy
interface with its default data driver (`ironic`), the ramdisk booted under qemu (tests/vmbench),
SSH with the ramdisk's pinned host key and the bench's client key, the input document uploaded
by the conductor, `provision` run detached in the VM and followed by the periodic task, an image
downloaded by the guest over HTTP, mdadm/LVM/mkfs on the VM's virtio disks.

How the conductor finds the ramdisk is real too: the node has no provision_ssh_address. The VM
has a second NIC on a provisioning network of its own (a tap device with dnsmasq's DHCP,
tests/vmbench/tapnet.py); the ramdisk's provision-ironic-agent looks the node up by that NIC's
MAC through Ironic's API, heartbeats with the address DHCP gave it and the host key it made at
boot, and the conductor connects there with that key pinned.

What stands in: the bench boots the VM itself, in place of Ironic's PXE boot, and puts the
ipa-api-url that Ironic gives ramdisks ([service_catalog]endpoint_override) on the kernel
command line itself. The node uses fake-hardware with the fake power and boot interfaces, so
"power on into the ramdisk", "set boot device" and "reboot to instance" are no-ops, and undeploy
does not power the VM off. Network boot and power through Redfish are issue 15.

The image is what Nova would give: a Glance image UUID. A real Glance (tests/ironic/
realglance.py) holds a 32 MiB ext4 partition image with a marker file; Ironic resolves the UUID,
caches the image and serves it from its http_root on the provisioning network; the ramdisk
downloads it from there, checks Glance's sha512 and writes it on the root LV of the layout
(samples/two-disk-raid-lvm.json, `bootloader: none` since the image has no grub).
Prerequisites missing fail in CI (CI=true) and skip elsewhere.
"""

import json
import os
import shutil
import subprocess
import time

import pytest

from tests.ironic import realenv, realglance
from tests.ironic.conftest import require
from tests.vmbench import VM, FileServer, TapNetwork, ensure_ramdisk
from tests.vmbench.ramdisk import client_key

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAYOUT = os.path.join(ROOT, "samples", "two-disk-raid-lvm.json")
MARKER = "deployed by a real Ironic through the provision deploy interface\n"
# TCG: boot ~25-35 s, provision of this layout 40-90 s; CI shares the 2 cores.
DEPLOY_TIMEOUT = 900


def _missing():
    missing = realenv.missing_prerequisites()
    missing += [t for t in ("qemu-system-x86_64", "mmdebstrap", "cpio", "zstd", "ssh",
                            "mkfs.ext4", "dnsmasq", "ip") if not shutil.which(t)]
    if not os.path.exists("/dev/net/tun"):
        missing.append("/dev/net/tun (the VM's provisioning network is a tap device)")
    if os.geteuid() != 0:
        missing.append("root (the ramdisk build runs mmdebstrap --mode=root)")
    return missing


def _root_image(directory):
    """A small ext4 partition image holding MARKER; returns its path."""
    tree = os.path.join(directory, "tree")
    os.makedirs(tree)
    with open(os.path.join(tree, "marker"), "w") as f:
        f.write(MARKER)
    image = os.path.join(directory, "root.img")
    with open(image, "wb") as f:
        f.truncate(32 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-L", "imgroot", "-d", tree, image], check=True)
    return image


@pytest.fixture(scope="module")
def provisioning_net(tmp_path_factory):
    require(not _missing(), f"missing: {_missing()}")
    with TapNetwork(tmp_path_factory.mktemp("provnet")) as net:
        yield net


@pytest.fixture(scope="module")
def vm_ironic(tmp_path_factory, provisioning_net):
    workdir = str(tmp_path_factory.mktemp("vm-ironic"))
    glance = realglance.Glance(workdir).start()
    httpboot = os.path.join(workdir, "httpboot")
    os.makedirs(httpboot)
    # The conductor's image cache, served on the provisioning network (Ironic's [deploy]
    # http_url is what the ramdisk downloads from).
    http = FileServer(httpboot, address=provisioning_net.host_address).__enter__()
    server = realenv.Ironic(workdir, {
        "ssh_private_key_file": str(client_key()),
        "ssh_user": "root",
        "poll_interval": 2,
        "deploy_timeout": DEPLOY_TIMEOUT,
        "connect_timeout": 10,
        "command_timeout": 60,
        "events_kept": 500,      # keep them all: the test reads the steps back from the node
    }, api_host=provisioning_net.host_address,
        extra_conf=realglance.ironic_conf(glance, workdir, http.url()))
    # data_driver, provision_command and remote_dir stay the defaults a ramdisk uses
    server.glance, server.http = glance, http
    try:
        server.start()
        yield server
    finally:
        server.stop()
        http.__exit__(None, None, None)
        glance.stop()


def test_ironic_deploys_the_vm(vm_ironic, provisioning_net, tmp_path):
    started = time.monotonic()
    ramdisk = ensure_ramdisk()
    image = _root_image(str(tmp_path))
    with open(LAYOUT) as f:
        layout = json.load(f)
    layout["bootloader"] = {"type": "none"}

    glance_image = vm_ironic.glance.create_image(image, "provision-vm-root")
    assert glance_image["os_hash_value"] == realglance.file_digest(image, "sha512")
    with VM(disks=3, disk_size="4G", name="ironic-deploy", ramdisk=ramdisk,
               append=f"ipa-api-url={vm_ironic.ramdisk_api_url}",
               extra_args=provisioning_net.qemu_args()) as vm:
        # No address, port or host key: the ramdisk's heartbeat brings them.
        # The image as Nova names it: a Glance UUID, no URL, no checksum.
        uuid = vm_ironic.enroll("vm", {}, {
            "image_source": glance_image["id"],
            "provision_layout": layout,
        }, macs=[provisioning_net.mac])
        deploy_started = time.monotonic()
        vm_ironic.set_state(uuid, "active")
        node = vm_ironic.wait_state(uuid, ["active", "deploy failed"], DEPLOY_TIMEOUT + 60)
        deploy_seconds = time.monotonic() - deploy_started
        assert node["provision_state"] == "active", node["last_error"]
        assert node["last_error"] is None

        # The conductor reached the ramdisk where DHCP put it, with the key it made at boot.
        dii = node["driver_internal_info"]
        leased = provisioning_net.leased_address()
        assert leased and dii["provision_ssh_address"] == leased, (leased, dii)
        assert dii["provision_ssh_port"] == 22
        assert vm.host_public_key and vm.host_public_key != ramdisk.host_public_key
        assert dii["provision_host_key"] == vm.host_public_key
        assert "provision_ssh_address" not in node["driver_info"]
        agent_log = vm.ssh("cat /var/log/provision-ironic-agent.log").stdout
        assert f"this machine is node {uuid}" in agent_log, agent_log

        # Progress reached the node: every step's start and end, then provision's own result.
        assert dii["provision_exit_code"] == 0
        assert dii["provision_phase"] == "done"
        events = dii["provision_events"]
        assert dii["provision_events_count"] == len(events)
        steps = [e for e in events if e["event"] == "step"]
        done = [e["kind"] for e in steps if e["status"] == "done"]
        for kind in ("md_create", "pv_create", "vg_create", "lv_create", "mkfs", "write_image",
                     "fstab"):
            assert kind in done, (kind, done)
        assert len(done) == steps[0]["count"], steps[-3:]
        assert [e["status"] for e in events if e["event"] == "result"] == ["ok"]
        # The ramdisk downloaded Glance's image from the conductor's cache.
        assert f"/agent_images/{uuid}" in vm_ironic.http.requested, vm_ironic.http.requested

        # The layout is on the VM's disks, read back in the VM.
        mdstat = vm.mdstat()
        assert mdstat.count("active raid1") == 2, mdstat
        for member in ("vda2", "vdb2", "vda3", "vdb3"):
            assert member in mdstat, mdstat
        lvs = {lv["lv_name"]: lv for lv in vm.lvs() if lv["vg_name"] == "os"}
        assert set(lvs) == {"root", "swap", "data"}, lvs
        assert int(lvs["root"]["lv_size"]) == 1536 << 20
        assert int(lvs["swap"]["lv_size"]) == 256 << 20
        blkid = vm.blkid()
        boot = vm.ssh("readlink -f /dev/md/boot").stdout.strip()
        assert blkid[boot]["TYPE"] == "ext2" and blkid[boot]["LABEL"] == "boot"
        assert blkid["/dev/mapper/os-root"]["TYPE"] == "ext4"
        assert blkid["/dev/mapper/os-swap"]["TYPE"] == "swap"
        assert blkid["/dev/mapper/os-data"]["TYPE"] == "xfs"
        assert blkid["/dev/mapper/os-data"]["LABEL"] == "data"
        # The image the guest fetched is the root filesystem, grown to the LV, with our fstab.
        vm.ssh("mkdir -p /mnt/check && mount -o ro /dev/os/root /mnt/check")
        try:
            assert vm.read_text("/mnt/check/marker") == MARKER
            fstab = vm.read_text("/mnt/check/etc/fstab")
            size = int(vm.ssh("df -B1 --output=size /mnt/check | tail -1").stdout)
        finally:
            vm.ssh("umount /mnt/check", check=False)
        mounts = {line.split()[1] for line in fstab.splitlines()
                  if line.strip() and not line.startswith("#")}
        assert {"/", "/boot", "/srv/data"} <= mounts, fstab
        assert size > 1 << 30, size

        vm_ironic.set_state(uuid, "deleted")
        node = vm_ironic.wait_state(uuid, ["available", "error"], 120)
        assert node["provision_state"] == "available", node["last_error"]
        print(f"\nVM boot to SSH {vm.boot_seconds:.1f} s, deploy to active {deploy_seconds:.1f} s, "
              f"test {time.monotonic() - started:.1f} s, {len(events)} events, "
              f"{dii['provision_heartbeats']} heartbeats, ramdisk at {leased}")
