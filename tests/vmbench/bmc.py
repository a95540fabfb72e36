"""BMCs for libvirt domains, as Ironic's real power and management interfaces talk to them:
sushy-tools' Redfish emulator (`redfish`) and virtualbmc (`ipmi`), both with their libvirt
drivers.

Both need libvirt's Python binding, which only Debian's python3-libvirt provides here (PyPI's
libvirt-python would compile against libvirt-dev). So their venv is built once per version
from Debian's /usr/bin/python3 with --system-site-packages, under the project's cache.
"""

import os
import shutil
import subprocess
import time

import requests

from tests.vmbench import procs
from tests.vmbench.libvirt import OVMF_CODE, OVMF_MS_VARS, OVMF_VARS, URI

SUSHY_TOOLS = "2.2.0"
VIRTUALBMC = "3.3.0"
CACHE = os.environ.get("PROVISION_AGENT_CACHE") or os.path.expanduser("~/.cache/provision-agent")
VENV = os.path.join(CACHE, f"bmc-venv-sushy{SUSHY_TOOLS}-vbmc{VIRTUALBMC}")


def ensure_venv():
    """The venv's bin directory; built when missing (a failed build leaves nothing)."""
    bin_dir = os.path.join(VENV, "bin")
    if os.path.exists(os.path.join(VENV, ".complete")):
        return bin_dir
    shutil.rmtree(VENV, ignore_errors=True)
    try:
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", VENV],
                       check=True)
        subprocess.run([os.path.join(bin_dir, "pip"), "install", "-q",
                        f"sushy-tools=={SUSHY_TOOLS}", f"virtualbmc=={VIRTUALBMC}"], check=True)
        subprocess.run([os.path.join(bin_dir, "python"), "-c", "import libvirt"], check=True)
    except BaseException:
        shutil.rmtree(VENV, ignore_errors=True)
        raise
    open(os.path.join(VENV, ".complete"), "w").close()
    return bin_dir


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedfishEmulator:
    """sushy-emulator on 127.0.0.1, limited to the given domains; storage_pool: the libvirt
    pool (libvirt.StoragePool) its virtual media uploads ISOs to; uefi_code: the OVMF it
    gives a UEFI domain whose boot mode or Secure Boot it changes (one for all domains)."""

    def __init__(self, workdir, domain_uuids, storage_pool="default", uefi_code=OVMF_CODE):
        self.dir = os.path.join(workdir, "sushy")
        os.makedirs(self.dir, exist_ok=True)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.domain_uuids = list(domain_uuids)
        self.storage_pool = storage_pool
        self.uefi_code = uefi_code
        self.proc = None

    def start(self, timeout=60):
        bin_dir = ensure_venv()
        conf = os.path.join(self.dir, "emulator.conf")
        with open(conf, "w") as f:
            f.write(f"""SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'
SUSHY_EMULATOR_LISTEN_PORT = {self.port}
SUSHY_EMULATOR_LIBVIRT_URI = {URI!r}
SUSHY_EMULATOR_ALLOWED_INSTANCES = {self.domain_uuids!r}
# Debian's OVMF; Legacy is SeaBIOS (no loader element). A Secure Boot change rewrites the
# loader from this map (the same code either way) and the NVRAM template from the two below;
# the driver reports Secure Boot on exactly when the template is the enabled one.
SUSHY_EMULATOR_BOOT_LOADER_MAP = {{'UEFI': {{'x86_64': {self.uefi_code!r}}},
                                  'Legacy': {{'x86_64': None}}}}
SUSHY_EMULATOR_SECURE_BOOT_DISABLED_NVRAM = {OVMF_VARS!r}
SUSHY_EMULATOR_SECURE_BOOT_ENABLED_NVRAM = {OVMF_MS_VARS!r}
SUSHY_EMULATOR_STORAGE_POOL = {self.storage_pool!r}
""")
        self.out = open(os.path.join(self.dir, "sushy.log"), "w")
        self.proc = subprocess.Popen([os.path.join(bin_dir, "sushy-emulator"), "--config", conf],
                                     stdout=self.out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sushy-emulator exited with {self.proc.returncode}; "
                                   f"see {self.dir}/sushy.log")
            try:
                if requests.get(self.url + "/redfish/v1/Systems", timeout=2).ok:
                    return self
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("sushy-emulator did not answer")
            time.sleep(0.3)

    def driver_info(self, domain_uuid):
        return {"redfish_address": self.url,
                "redfish_system_id": f"/redfish/v1/Systems/{domain_uuid}",
                "redfish_username": "admin", "redfish_password": "password"}

    def secure_boot(self, domain_uuid):
        """SecureBootEnable as the BMC reports it."""
        res = requests.get(f"{self.url}/redfish/v1/Systems/{domain_uuid}/SecureBoot",
                           timeout=30)
        res.raise_for_status()
        return res.json()["SecureBootEnable"]

    def set_secure_boot(self, domain_uuid, enabled):
        """What Ironic's redfish management interface sends (sushy's SecureBoot.set_enabled),
        for a change made behind Ironic's back."""
        res = requests.patch(f"{self.url}/redfish/v1/Systems/{domain_uuid}/SecureBoot",
                             json={"SecureBootEnable": bool(enabled)}, timeout=30)
        if not res.ok:
            raise RuntimeError(f"SecureBoot PATCH: {res.status_code} {res.text[:500]}")

    def log_text(self):
        with open(os.path.join(self.dir, "sushy.log"), errors="replace") as f:
            return f.read()

    def stop(self):
        procs.stop(self.proc)


class VirtualBMC:
    """vbmcd with one IPMI endpoint per domain on 127.0.0.1."""

    USER, PASSWORD = "admin", "password"

    def __init__(self, workdir):
        self.dir = os.path.join(workdir, "vbmc")
        os.makedirs(os.path.join(self.dir, "config"), exist_ok=True)
        self.conf = os.path.join(self.dir, "virtualbmc.conf")
        with open(self.conf, "w") as f:
            f.write(f"""[default]
config_dir = {self.dir}/config
pid_file = {self.dir}/vbmcd.pid
server_port = {_free_port()}
[log]
logfile = {self.dir}/vbmcd.log
""")
        self.env = dict(os.environ, VIRTUALBMC_CONFIG=self.conf)
        self.bin = None
        self.proc = None
        self.ports = {}

    def start(self, timeout=60):
        # In the foreground, as our child: the daemon's pid file said 0, and os.kill(0) to
        # stop it took down the test's own process group.
        self.bin = ensure_venv()
        self.out = open(os.path.join(self.dir, "vbmcd.out"), "w")
        self.proc = subprocess.Popen([os.path.join(self.bin, "vbmcd"), "--foreground"],
                                     env=self.env, stdout=self.out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while subprocess.run([os.path.join(self.bin, "vbmc"), "list"], env=self.env,
                             capture_output=True, timeout=30).returncode:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"vbmcd did not come up; see {self.dir}/vbmcd.out")
            time.sleep(0.5)
        return self

    def _vbmc(self, *args):
        return subprocess.run([os.path.join(self.bin, "vbmc"), *args], env=self.env, check=True,
                              capture_output=True, text=True, timeout=60).stdout

    def add(self, domain_name):
        port = _free_port()
        self._vbmc("add", domain_name, "--address", "127.0.0.1", "--port", str(port),
                   "--username", self.USER, "--password", self.PASSWORD, "--libvirt-uri", URI)
        self._vbmc("start", domain_name)
        self.ports[domain_name] = port
        return {"ipmi_address": "127.0.0.1", "ipmi_port": port, "ipmi_username": self.USER,
                "ipmi_password": self.PASSWORD}

    def stop(self):
        procs.stop(self.proc)
