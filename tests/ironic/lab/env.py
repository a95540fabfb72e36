"""A small bare-metal lab for a real Ironic: libvirt domains as the machines, sushy-tools'
Redfish emulator (and virtualbmc's IPMI) as their BMCs, a bridge with dnsmasq that Ironic's
`dnsmasq` DHCP provider drives, iPXE/PXE boot files served by Ironic's own boot interfaces,
and our ramdisk as the deploy kernel and ramdisk. Everything is started here and stopped when
the lab closes; no hand steps.
"""

import contextlib
import copy
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

from provision_agent.agent.ironic import DEFAULT_BINDING_DIR
from tests.ironic import realenv, realglance
from tests.ironic.conductors import FAILOVER_OPTIONS
from tests.vmbench import FileServer, testos
from tests.vmbench.bmc import RedfishEmulator, VirtualBMC
from tests.vmbench.bootnet import IPXE_FILES, BootNetwork
from tests.vmbench.libvirt import (
    OVMF_CODE,
    OVMF_MS_VARS,
    OVMF_SECBOOT_CODE,
    Domain,
    Libvirtd,
    StoragePool,
)
from tests.vmbench.ramdisk import client_key
from tests.vmbench.vm import HOST_KEY_LINE  # noqa: F401  (the tests read consoles with it)

ARTIFACTS = pathlib.Path(__file__).resolve().parents[3] / "artifacts" / "ironic-lab"
TOOLS = ("qemu-system-x86_64", "virsh", "dnsmasq", "ip", "ipmitool", "mmdebstrap", "zstd",
         "sfdisk", "blkid", "wipefs")
# What Ironic's redfish-virtual-media boot builds a BIOS ISO with (Debian's isolinux)
ISOLINUX_BIN = "/usr/lib/ISOLINUX/isolinux.bin"


def missing():
    found = realenv.missing_prerequisites()
    found += [t for t in TOOLS if not shutil.which(t)]
    found += [p for p in ("/usr/sbin/libvirtd", "/usr/sbin/virtlogd", OVMF_CODE, *IPXE_FILES)
              if not os.path.exists(p)]
    if subprocess.run(["/usr/bin/python3", "-c", "import libvirt"],
                      capture_output=True).returncode:
        found.append("python3-libvirt (Debian's binding, for the BMC emulators)")
    if os.geteuid() != 0:
        found.append("root (libvirtd, bridges, the ramdisk build)")
    return found


def secure_boot_missing():
    """What a "uefi-secureboot" machine needs beyond the rest of the lab (Debian's ovmf)."""
    return [p for p in (OVMF_SECBOOT_CODE, OVMF_MS_VARS) if not os.path.exists(p)]


def workdir():
    """A directory the lab's unprivileged daemons can enter: qemu runs as libvirt-qemu and
    dnsmasq's TFTP as nobody, and pytest's own tmp directories are private to root."""
    path = tempfile.mkdtemp(prefix="provision-lab-", dir=os.environ.get("VMBENCH_TMP",
                                                                       "/var/tmp"))
    os.chmod(path, 0o755)
    return path


class Lab:
    """with Lab(workdir, ramdisk, machines={"bios": "bios", ...}) as lab: lab.ironic, lab.net,
    lab.domains[name], lab.bmc, lab.enroll(name, ...). A machine's firmware: "bios", "uefi", or
    "uefi-secureboot" (q35 with SMM, OVMF that enforces Secure Boot once the BMC turns it on;
    not in the same lab as "uefi": the BMC emulator has one UEFI loader for all machines)."""

    def __init__(self, workdir, ramdisk, machines, provision_opts, serve_dir, disks=2,
                 ipmi=False, automated_clean=True, glance=False, cpus=2, conductors=1,
                 ipa_ramdisk=None, nic_model="virtio", ipv6_only=False):
        self.workdir = str(workdir)
        # the bridge with no IPv4: Ironic's API, the HTTP servers and DHCPv6 on its ULA
        # (tests/vmbench/bootnet.py; tests/ironic/lab/test_ipv6.py)
        self.ipv6_only = ipv6_only
        self.nic_model = nic_model          # every machine's NIC (tests/vmbench/libvirt.py)
        self.cpus = cpus                    # vCPUs per machine
        self.ramdisk = ramdisk
        self.machines = dict(machines)      # name -> firmware
        if {"uefi", "uefi-secureboot"} <= set(self.machines.values()):
            # sushy-tools writes its one UEFI loader into any domain whose boot mode or Secure
            # Boot it changes: the SMM firmware on a pc machine does not start.
            raise ValueError("a lab has either uefi or uefi-secureboot machines, not both")
        self.provision_opts = provision_opts
        self.serve_dir = serve_dir          # the images the machines download, on the bridge
        self.disks = disks
        self.ipmi = ipmi
        self.automated_clean = automated_clean
        self.glance = glance
        # >1: ironic-api and that many conductors over JSON-RPC on MariaDB, failing over
        # in seconds (tests/ironic/conductors.py)
        self.conductors = conductors
        # Also Ironic's `direct` deploy with this ironic-python-agent ramdisk, for nodes
        # enrolled with enroll(..., ramdisk=lab.ipa_ramdisk) (benchmarks/head_to_head.py);
        # without it the lab's Ironic is configured as it always was.
        self.ipa_ramdisk = ipa_ramdisk
        self.stack = contextlib.ExitStack()

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.stack.close()
            raise
        return self

    def __exit__(self, *exc):
        self.stack.close()

    def _start(self):
        w = self.workdir
        self.stack.callback(shutil.rmtree, w, ignore_errors=True)
        self.stack.callback(self._keep_logs)
        self.stack.enter_context(Libvirtd(os.path.join(w, "libvirt")))
        self.net = self.stack.enter_context(BootNetwork(os.path.join(w, "net"),
                                                          ipv6_only=self.ipv6_only))
        self.domains = {}
        for i, (name, firmware) in enumerate(self.machines.items()):
            dom = Domain(os.path.join(w, name), f"pa-{name}-{os.getpid()}", self.net.bridge,
                         f"52:54:00:5b:{os.getpid() % 256:02x}:{i:02x}", disks=self.disks,
                         firmware=firmware, cpus=self.cpus, nic_model=self.nic_model)
            dom.define()
            self.stack.callback(dom.remove_disks)
            self.stack.callback(dom.undefine)
            self.domains[name] = dom
        pool = self.stack.enter_context(StoragePool(os.path.join(w, "pool"),
                                                    f"pa-pool-{os.getpid()}"))
        self.bmc = RedfishEmulator(w, [d.uuid for d in self.domains.values()],
                                   storage_pool=pool.name, uefi_code=self._uefi_code()).start()
        self.stack.callback(self.bmc.stop)
        self.vbmc = None
        if self.ipmi:
            self.vbmc = VirtualBMC(w).start()
            self.stack.callback(self.vbmc.stop)
        if self.glance:
            self.glance = realglance.Glance(w).start()
            self.stack.callback(self.glance.stop)
        self.http_root = http_root = os.path.join(w, "httpboot")
        os.makedirs(http_root)
        self.http = self.stack.enter_context(FileServer(http_root, address=self.net.host_address))
        self.images = self.stack.enter_context(
            FileServer(self.serve_dir, address=self.net.host_address))
        self.ironic = self._ironic(w, http_root)
        self.ironic.start()
        self.stack.callback(self.ironic.stop)

    def _uefi_code(self):
        if "uefi-secureboot" in self.machines.values():
            return OVMF_SECBOOT_CODE
        return OVMF_CODE

    def _ironic(self, w, http_root):
        if self.conductors == 1:
            return realenv.Ironic(w, self.provision_opts, api_host=self.net.host_address,
                                  extra_conf=self._ironic_conf(http_root))
        mariadb = realenv.MariaDB(w)
        mariadb.start()
        self.stack.callback(mariadb.stop)
        return realenv.Ironic(w, self.provision_opts, api_host=self.net.host_address,
                              extra_conf=self._ironic_conf(http_root)
                              + FAILOVER_OPTIONS,
                              database=mariadb.url, split_api=True, conductors=self.conductors)

    def _keep_logs(self):
        """The lab's logs and consoles go to artifacts/ (the work directory is removed)."""
        out = ARTIFACTS / f"lab-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        for pattern in ("ironic/*.log", "net/dnsmasq.log", "sushy/sushy.log",
                        "vbmc/vbmcd.log", "*/console.log"):
            for path in pathlib.Path(self.workdir).glob(pattern):
                target = out / path.relative_to(self.workdir)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
        self.artifacts = out

    def _ironic_conf(self, http_root):
        # The ramdisk authorizes the conductor's key because it is built in (ensure_ramdisk
        # passes --authorized-key, as docs/ironic.md section 3 has operators do): booted by
        # Ironic it ignores sshkey= on its command line, where instance_info can put words.
        w = self.workdir
        return f"""[DEFAULT]
enabled_hardware_types = provision-redfish,provision-ipmi,fake-hardware
enabled_boot_interfaces = ipxe,pxe,redfish-virtual-media,fake
isolinux_bin = {ISOLINUX_BIN}
enabled_power_interfaces = redfish,ipmitool,fake
enabled_management_interfaces = redfish,ipmitool,fake
{self.net.ironic_conf()}
[deploy]
http_root = {http_root}
http_url = {self.http.url().rstrip("/")}
[pxe]
kernel_append_params = console=ttyS0
images_path = {w}/images
instance_master_path = {w}/master_images
[conductor]
automated_clean = {str(self.automated_clean).lower()}
file_url_allowed_paths = {",".join(self._ramdisk_dirs())}
# a ramdisk that never heartbeats fails the deploy here, not after Ironic's 30 minutes
deploy_callback_timeout = {self.provision_opts["deploy_timeout"] + 60}
clean_callback_timeout = {self.provision_opts["deploy_timeout"] + 60}
sync_power_state_interval = -1
# as docs/ironic.md section 9 recommends: the ramdisk goes out compressed (91 MiB, not 351)
disable_zstandard_decompression = true
{self._glance_conf()}
[nova]
# No Nova here, and nodes allocated by metalsmith have instance UUIDs (docs/ironic.md section 10)
send_power_notifications = false
[provision_agent]
# Where our ramdisk's agent writes its node binding (the default of both sides); realenv's
# stand-in ramdisk, a directory on this host, is not what these machines boot.
binding_dir = {DEFAULT_BINDING_DIR}
[redfish]
# the emulator answers at once; Ironic's defaults wait up to minutes between retries
connection_attempts = 3
connection_retry_interval = 1
# virtual media: the ISOs Ironic builds are served from http_root (no Swift here), with the
# command line the ramdisk needs (Ironic's default is "nofb vga=normal")
use_swift = false
kernel_append_params = console=ttyS0
""" + self._ipa_conf()

    def _ramdisk_dirs(self):
        dirs = [os.path.dirname(str(self.ramdisk.kernel))]
        if self.ipa_ramdisk:
            dirs.append(os.path.dirname(str(self.ipa_ramdisk.kernel)))
        return dirs

    def _ipa_conf(self):
        """What Ironic's `direct` deploy needs beside ours (benchmarks/head_to_head_notes.md)."""
        if not self.ipa_ramdisk:
            return ""
        w = self.workdir
        return f"""[DEFAULT]
enabled_deploy_interfaces = provision,direct,fake
enabled_raid_interfaces = no-raid,agent,provision
[agent]
# IPA's self-signed certificate (auto TLS) is kept here; the default is outside the lab
certificates_path = {w}/ironic/certificates
# without it IPA 13 refuses every grub-install (partition images on both firmwares, RAID)
enable_bios_bootloader_install = true
deploy_logs_collect = on_failure
deploy_logs_local_path = {w}/ironic/deploy-logs
[deploy]
# IPA's erase_devices shreds every disk (minutes under TCG); its metadata erase (99) is
# what ours does in automated cleaning
erase_devices_priority = 0
# an IPA node's software RAID (raid_interface agent) is deleted in automated cleaning, before
# the metadata erase, which skips RAID members (IPA's default priority is 0: kept)
delete_configuration_priority = 100
"""

    def _glance_conf(self):
        if not self.glance:
            return ""
        # Glance UUIDs: Ironic caches the image and serves it from http_root
        return f"""[glance]
auth_type = none
endpoint_override = {self.glance.url}
[agent]
image_download_source = http
"""

    def driver_info(self, name, power="redfish", ramdisk=None):
        """ramdisk: the node's deploy ramdisk when not the lab's own (e.g. lab.ipa_ramdisk)."""
        dom = self.domains[name]
        info = deploy_ramdisk_info(ramdisk or self.ramdisk)
        if power == "redfish":
            info.update(self.bmc.driver_info(dom.uuid))
        else:
            info.update(self.vbmc.add(dom.name))
        return info

    def enroll(self, name, power="redfish", boot="ipxe", provide_timeout=900, interfaces=None,
               properties=None, ramdisk=None, first_cleaning=True):
        """interfaces, properties: more of the node's (e.g. {"inspect": "agent"}); ramdisk: as
        for driver_info; first_cleaning: as for realenv.Ironic.enroll."""
        dom = self.domains[name]
        hardware = "provision-redfish" if power == "redfish" else "provision-ipmi"
        management = "redfish" if power == "redfish" else "ipmitool"
        capabilities = "boot_mode:" + ("uefi" if dom.uefi else "bios")
        if dom.firmware == "uefi-secureboot":
            # What Nova's capabilities filter matches a flavor's capabilities:secure_boot=true
            # against; Ironic itself only reads instance_info's.
            capabilities += ",secure_boot:true"
        return self.ironic.enroll(
            name, self.driver_info(name, power, ramdisk), {}, macs=[dom.mac], driver=hardware,
            interfaces={"boot": boot, "power": "redfish" if power == "redfish" else "ipmitool",
                        "management": management, **(interfaces or {})},
            properties={"capabilities": capabilities, **(properties or {})},
            provide_timeout=provide_timeout, first_cleaning=first_cleaning)


def deploy_ramdisk_info(ramdisk):
    """The driver_info keys that name a node's deploy kernel and ramdisk."""
    return {"deploy_kernel": f"file://{ramdisk.kernel}",
            "deploy_ramdisk": f"file://{ramdisk.initramfs}"}


SAMPLES = pathlib.Path(__file__).resolve().parents[3] / "samples"
LAYOUTS = {"bios": "two-disk-raid-lvm.json", "uefi": "uefi.json"}
MARKER = r"PROVISION-BOOT-OK cd=(\S+)"
FAILED = ["deploy failed", "clean failed", "error"]


def build_test_os():
    """The bootable test OS (tests/images/build-debian.sh, cached by the script's hash)."""
    return testos.build_dir()


def provision_opts(deploy_timeout):
    """[provision_agent] for the lab's Ironic: the bench's SSH key, quick polls."""
    return {"ssh_private_key_file": str(client_key()), "ssh_user": "root", "poll_interval": 3,
            "deploy_timeout": deploy_timeout, "connect_timeout": 10, "command_timeout": 60,
            "events_kept": 500}


def instance_info(lab, test_os, firmware, layout=None):
    """The test OS as a partition image on the firmware's sample layout (or layout: a sample's
    file name, or a layout), with a configdrive."""
    layout = (copy.deepcopy(layout) if isinstance(layout, dict)
              else json.loads((SAMPLES / (layout or LAYOUTS[firmware])).read_text()))
    layout["bootloader"] = {"boot_mode": firmware, "kernel_params": "console=ttyS0"}
    layout.pop("images", None)      # the image comes through Ironic (image_source)
    image = test_os / "root.ext4.zst"
    return {"image_source": lab.images.url(image.name), "image_os_hash_algo": "sha256",
            "image_os_hash_value": realglance.file_digest(image, "sha256"),
            "provision_layout": layout,
            "configdrive": {"meta_data": {"uuid": f"lab-{firmware}",
                                          "hostname": f"lab-{firmware}"}}}


def set_instance_info(ironic, uuid, info):
    ironic.request("PATCH", f"/v1/nodes/{uuid}", [
        {"op": "add", "path": f"/instance_info/{k}", "value": v} for k, v in info.items()])


def report_times(name, times):
    """Prints a test's phase times and keeps them with the lab's logs (CI's quiet pytest
    output does not show the print)."""
    print(f"\n{name}: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"{name}-times.json").write_text(json.dumps(
        {k: round(v, 1) for k, v in times.items()}, indent=1) + "\n")


def wait_state(ironic, uuid, states, timeout):
    """The node once it reached one of states or a failure state; asserts it is one of states."""
    node = ironic.wait_state(uuid, list(states) + FAILED, timeout)
    assert node["provision_state"] in states, (node["provision_state"], node["last_error"])
    return node

