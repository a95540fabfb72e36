"""Secure Boot in the libvirt lab: what Ironic, sushy-tools and OVMF do with it, and a probe
that shows it on one machine without deploying anything.

A "uefi-secureboot" machine (tests/vmbench/libvirt.py) is q35 with SMM and Debian's
Secure-Boot-capable OVMF, Secure Boot off (a variable store with no keys). Ironic turns it on
with its redfish management interface (PATCH .../SecureBoot {"SecureBootEnable": true});
sushy-tools' libvirt driver then rewrites the domain's persistent definition: <loader
secure='yes'> and an NVRAM made from the Microsoft-keyed template, under a new file name, so
the next start has the keys and enforces them. OVMF then refuses what is not signed with
"BdsDxe: failed to load Boot0001 ...: Access Denied" on the serial console; Debian's signed
shim and grub boot.

    python -m tests.ironic.lab.secureboot      (root; from the ironic-lab tox venv)

enrolls the machine in a real Ironic, then, with an ESP written onto its disk from the host:
Secure Boot off: unsigned iPXE starts; on (through Ironic's API): the same iPXE is refused
and Debian's signed shim + grub (apt-get download, cached) start; off again (through Redfish,
behind Ironic's back): iPXE starts again. Times and console lines are printed.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.ironic.realenv import wait_for
from tests.vmbench.libvirt import OVMF_MS_VARS, OVMF_VARS

# OVMF's boot manager, when the image's signature is not in db (or is in dbx)
DENIED = r'BdsDxe: failed to load (Boot[0-9A-F]{4}) "([^"]*)" from \S+: Access Denied'
IPXE_STARTED = r"iPXE initialising devices"
SIGNED_GRUB = "SIGNED-GRUB-RAN"
CACHE = Path(os.environ.get("PROVISION_AGENT_CACHE")
             or os.path.expanduser("~/.cache/provision-agent")) / "secureboot-efi"
MiB = 1 << 20


def set_secure_boot(ironic, uuid, target, timeout=60):
    """Through Ironic's API (1.76+), as an operator would; the conductor's redfish management
    interface PATCHes the BMC. Returns the node once its secure_boot field says target."""
    ironic.request("PUT", f"/v1/nodes/{uuid}/states/secure_boot", {"target": target})
    return wait_for(lambda: (lambda n: n if n["secure_boot"] is target else None)(
        ironic.node(uuid)), timeout, interval=0.5, what=f"node {uuid} secure_boot {target}")


def power(ironic, uuid, target, timeout=120):
    """target: "power on" / "power off"; returns once Ironic saw the BMC get there."""
    ironic.request("PUT", f"/v1/nodes/{uuid}/states/power", {"target": target})
    return wait_for(lambda: (lambda n: n if n["power_state"] == target
                             and not n["target_power_state"] else None)(ironic.node(uuid)),
                    timeout, interval=0.5, what=f"node {uuid} {target}")


def boot_from_disk(ironic, uuid):
    ironic.request("PUT", f"/v1/nodes/{uuid}/management/boot_device",
                   {"boot_device": "disk", "persistent": True})


def firmware_state(dom):
    """"on"/"off" from the domain's persistent definition, checked to be one of the two
    shapes sushy-tools writes (loader secure= and NVRAM template agree)."""
    fw = dom.firmware_config()
    shape = (fw["secure"], fw["template"])
    assert shape in (("yes", OVMF_MS_VARS), ("no", OVMF_VARS)), fw
    return "on" if fw["secure"] == "yes" else "off"


def write_esp(disk_image, files):
    """A GPT with one ESP at 1 MiB holding files ({path in the ESP: bytes or host path}),
    written into a raw disk image from the host (mkfs.vfat and mtools on a plain file: the
    host's loop devices do not scan partitions)."""
    with tempfile.TemporaryDirectory() as tmp:
        fat = Path(tmp) / "esp.fat"
        with open(fat, "wb") as f:
            f.truncate(64 * MiB)
        subprocess.run(["mkfs.vfat", "-F", "32", "-n", "ESP", str(fat)], check=True,
                       capture_output=True)
        dirs = sorted({str(Path(p).parent) for p in files} - {"."})
        for d in dirs:
            parts = Path(d).parts
            for i in range(1, len(parts) + 1):
                subprocess.run(["mmd", "-D", "s", "-i", str(fat), "::/" + "/".join(parts[:i])],
                               capture_output=True)
        for dest, src in files.items():
            if isinstance(src, bytes):
                path = Path(tmp) / "content"
                path.write_bytes(src)
                src = path
            subprocess.run(["mcopy", "-o", "-i", str(fat), str(src), "::/" + dest], check=True)
        subprocess.run(["sgdisk", "--zap-all", str(disk_image)], check=True, capture_output=True)
        subprocess.run(["sgdisk", "-n1:2048:+64M", "-t1:ef00", str(disk_image)], check=True,
                       capture_output=True)
        subprocess.run(["dd", f"if={fat}", f"of={disk_image}", "bs=1M", "seek=1",
                        "conv=notrunc", "status=none"], check=True)


def signed_boot_files():
    """Debian's Microsoft-signed shim and Debian-signed grub, from the host's apt sources
    (downloaded once, kept in the cache): {"shim": path, "grub": path}."""
    want = {"shim": CACHE / "usr/lib/shim/shimx64.efi.signed",
            "grub": CACHE / "usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed"}
    if all(p.exists() for p in want.values()):
        return want
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)        # apt's _apt user downloads into it
        subprocess.run(["apt-get", "download", "shim-signed", "grub-efi-amd64-signed"],
                       cwd=tmp, check=True, capture_output=True)
        for deb in Path(tmp).glob("*.deb"):
            subprocess.run(["dpkg", "-x", str(deb), str(CACHE)], check=True)
    missing = [str(p) for p in want.values() if not p.exists()]
    assert not missing, f"not in the packages: {missing}"
    return want


def _boot(lab, uuid, dom, pattern, timeout):
    """Power on from disk; the console's first match of pattern or of DENIED, and seconds."""
    since = len(dom.console_text())
    t = time.monotonic()
    power(lab.ironic, uuid, "power on")
    m = dom.wait_console(f"(?:{pattern})|(?:{DENIED})", timeout, since=since)
    took = time.monotonic() - t
    power(lab.ironic, uuid, "power off")
    return m, took


def probe(lab, name="sb"):
    """The whole probe on lab.domains[name] (firmware "uefi-secureboot"); returns its report
    lines. Raises AssertionError when the firmware did not do what Secure Boot means."""
    dom = lab.domains[name]
    report = []
    t = time.monotonic()
    uuid = lab.enroll(name)
    report.append(f"enroll+provide (no cleaning): {time.monotonic() - t:.1f} s")
    boot_from_disk(lab.ironic, uuid)
    assert lab.bmc.secure_boot(dom.uuid) is False
    assert firmware_state(dom) == "off"
    ipxe = "/usr/lib/ipxe/ipxe.efi"
    write_esp(dom.disk_images[0], {"EFI/BOOT/BOOTX64.EFI": ipxe})

    m, took = _boot(lab, uuid, dom, IPXE_STARTED, 120)
    assert m.group(0) == IPXE_STARTED, m.group(0)
    report.append(f"SB off, unsigned iPXE: {m.group(0)!r} {took:.1f} s after power on")

    t = time.monotonic()
    node = set_secure_boot(lab.ironic, uuid, True)
    report.append(f"SB on through Ironic's API: node secure_boot={node['secure_boot']} "
                  f"after {time.monotonic() - t:.1f} s; {dom.firmware_config()}")
    assert lab.bmc.secure_boot(dom.uuid) is True and firmware_state(dom) == "on"
    assert dom.firmware_config()["nvram"].endswith(".secboot.fd")
    m, took = _boot(lab, uuid, dom, IPXE_STARTED, 120)
    assert m.group(0) != IPXE_STARTED, "unsigned iPXE started with Secure Boot on"
    report.append(f"SB on, unsigned iPXE: {m.group(0)!r} {took:.1f} s after power on")

    signed = signed_boot_files()
    # shim loads grubx64.efi from its own directory; grub reads grub.cfg beside itself
    write_esp(dom.disk_images[0], {
        "EFI/BOOT/BOOTX64.EFI": signed["shim"], "EFI/BOOT/grubx64.efi": signed["grub"],
        "EFI/BOOT/grub.cfg": f'echo "{SIGNED_GRUB}"\nsleep 1\nhalt\n'.encode()})
    m, took = _boot(lab, uuid, dom, SIGNED_GRUB, 120)
    assert m.group(0) == SIGNED_GRUB, m.group(0)
    report.append(f"SB on, Debian's signed shim + grub: {m.group(0)!r} {took:.1f} s")

    lab.bmc.set_secure_boot(dom.uuid, False)
    fw = dom.firmware_config()
    assert firmware_state(dom) == "off" and fw["nvram"].endswith(".nosecboot.fd"), fw
    report.append(f"SB off through Redfish: {fw}; Ironic still says secure_boot="
                  f"{lab.ironic.node(uuid)['secure_boot']} (it caches what it set)")
    write_esp(dom.disk_images[0], {"EFI/BOOT/BOOTX64.EFI": ipxe})
    m, took = _boot(lab, uuid, dom, IPXE_STARTED, 120)
    assert m.group(0) == IPXE_STARTED, m.group(0)
    report.append(f"SB off again, unsigned iPXE: {m.group(0)!r} {took:.1f} s")
    denied = re.findall(DENIED, dom.console_text())
    report.append(f"console lines refused: {denied}")
    return report


def main():
    from tests.ironic.lab import env as lablib
    from tests.vmbench import ensure_ramdisk

    missing = lablib.missing() + lablib.secure_boot_missing() + [
        t for t in ("mkfs.vfat", "mcopy", "mmd", "sgdisk", "apt-get", "dpkg")
        if not shutil.which(t)]
    if missing:
        sys.exit(f"missing: {missing}")
    started = time.monotonic()
    serve = tempfile.mkdtemp(prefix="sb-serve-", dir="/var/tmp")
    try:
        with lablib.Lab(lablib.workdir(), ensure_ramdisk(), {"sb": "uefi-secureboot"},
                        lablib.provision_opts(600), serve_dir=serve, disks=1,
                        automated_clean=False, cpus=1) as lab:
            report = probe(lab)
            # sushy-tools' own log lines stay below its log level: its access log shows it
            sushy = [line for line in lab.bmc.log_text().splitlines()
                     if "PATCH" in line and "/SecureBoot" in line]
            ironic = [line for line in lab.ironic.log_text().splitlines()
                      if "secure_boot" in line.lower() and "INFO" in line]
    finally:
        os.rmdir(serve)
    print("\n".join(report + ["sushy-tools:"] + sushy + ["ironic:"] + ironic))
    print(f"probe: {time.monotonic() - started:.0f} s in all; logs in {lab.artifacts}")


if __name__ == "__main__":
    main()
