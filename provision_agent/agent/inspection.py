"""In-band inspection: what the ramdisk tells Ironic about the machine.

Ironic's `agent` inspect interface boots the ramdisk with `ipa-inspection-callback-url` on the
kernel command line (Ironic's POST /v1/continue_inspection). The ramdisk posts the machine's
inventory there, in ironic-python-agent's format, and Ironic finds the node by the MACs in it,
runs its inspection hooks (interfaces, ports, architecture by default, and any the operator
enables: memory, boot mode, root device...), stores the inventory and powers the node off.
With fast track Ironic leaves it on, puts ipa-api-url on the command line too and answers the
inventory with the node's agent token, which the agent then heartbeats with (Taken).

The disks are what `provision inventory` prints (multipath and NVMe included), so a layout
validated on the conductor against the stored inventory sees the disks provision will see.
"""

import json
import logging
import os
import platform
import random
import re
import subprocess
import time

import requests

from provision_agent import redact
from provision_agent.agent import api

LOG = logging.getLogger(__name__)

# 1.84: /v1/continue_inspection (Ironic's own inspection, without ironic-inspector)
API_VERSION = "1.84"
MAX_READ = 1 << 20        # /proc and /sys files are small; the bound is for a broken one
# A MAC, with colons or pxelinux's `01-` hardware type and dashes
BOOTIF_RE = re.compile(r"(?:01-)?[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5}")


def _read(path, default=None):
    try:
        with open(path, errors="replace") as f:
            return f.read(MAX_READ).strip()
    except OSError:
        return default


def interfaces(sysfs="/sys/class/net", addresses=None):
    """Ethernet NICs with a device: name, MAC, first IPv4/IPv6 address, carrier."""
    addresses = addresses if addresses is not None else _addresses()
    result = []
    for name in sorted(os.listdir(sysfs)):
        path = os.path.join(sysfs, name)
        if _read(os.path.join(path, "type")) != "1" or not os.path.exists(
                os.path.join(path, "device")):
            continue
        mac = (_read(os.path.join(path, "address")) or "").lower()
        if not mac or mac == "00:00:00:00:00:00":
            continue
        v4, v6 = addresses.get(name, (None, None))
        result.append({"name": name, "mac_address": mac, "ipv4_address": v4,
                       "ipv6_address": v6,
                       "has_carrier": _read(os.path.join(path, "carrier")) == "1",
                       "product": _read(os.path.join(path, "device", "device")),
                       "vendor": _read(os.path.join(path, "device", "vendor"))})
    return result


def _addresses():
    """{interface: (first global IPv4, first global IPv6)} from `ip -j addr`."""
    try:
        out = subprocess.run(["ip", "-j", "addr", "show"], capture_output=True, text=True,
                             timeout=10, check=True).stdout
        links = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        LOG.warning("cannot read the NICs' addresses: %s", exc)
        return {}
    found = {}
    for link in links if isinstance(links, list) else []:
        v4 = v6 = None
        for a in link.get("addr_info") or []:
            if a.get("scope") != "global":
                continue
            if a.get("family") == "inet" and v4 is None:
                v4 = a.get("local")
            elif a.get("family") == "inet6" and v6 is None:
                v6 = a.get("local")
        found[link.get("ifname")] = (v4, v6)
    return found


def cpu(cpuinfo="/proc/cpuinfo"):
    text = _read(cpuinfo, "")
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                  if line.startswith("model name")), None)
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])
    return {"model_name": model, "architecture": platform.machine(),
            "count": os.cpu_count() or 1, "flags": flags[:512]}


def memory(meminfo="/proc/meminfo"):
    """total (bytes, what the kernel manages) and physical_mb (installed, rounded up to a
    GiB: the kernel keeps some for itself, and DMI is not always there to ask)."""
    total_kib = 0
    for line in _read(meminfo, "").splitlines():
        if line.startswith("MemTotal:"):
            total_kib = int(line.split()[1])
    total = total_kib * 1024
    return {"total": total, "physical_mb": -(-total // (1 << 30)) * 1024}


def system_vendor(dmi="/sys/class/dmi/id"):
    return {"product_name": _read(os.path.join(dmi, "product_name")),
            "serial_number": _read(os.path.join(dmi, "product_serial")),
            "manufacturer": _read(os.path.join(dmi, "sys_vendor"))}


def boot_info(bootif=None):
    """The boot mode, and the NIC the machine network-booted from: BOOTIF of the kernel
    command line, as Ironic's (i)PXE configs pass it (`52:54:00:..`, or pxelinux's
    `01-52-54-00-..`). Ironic's inspection marks that port, and only that one, as the one
    to PXE-boot ([inspector]update_pxe_enabled): without it every port of the node lost
    pxe_enabled, and the node's next network boot found no boot configuration for its MAC."""
    info = {"current_boot_mode": "uefi" if os.path.isdir("/sys/firmware/efi") else "bios"}
    if bootif and BOOTIF_RE.fullmatch(bootif):
        info["pxe_interface"] = bootif.lower()
    return info


def collect(disks=None, bootif=None):
    """The inventory Ironic's inspection takes (ironic-python-agent's keys); bootif: the
    kernel command line's BOOTIF."""
    if disks is None:
        from provision_agent.machine import disks as machine_disks
        from provision_agent.run.runner import Runner
        disks = machine_disks.discover(Runner())
    return {"interfaces": interfaces(), "cpu": cpu(), "memory": memory(), "disks": disks,
            "system_vendor": system_vendor(), "boot": boot_info(bootif),
            "hostname": platform.node()}


class Taken:
    """Ironic's answer to the inventory: the node's UUID ("" if it named none) and the agent
    token it handed out with it (API 1.84 answers as a lookup does), else None. With fast
    track the ramdisk heartbeats with that token: the lookup after it gets it hidden."""

    def __init__(self, uuid, token):
        self.uuid, self.token = uuid, token

    def __repr__(self):
        return f"Taken(uuid={self.uuid!r}, token={'<set>' if self.token else None})"


def _taken(body):
    try:
        uuid = (body.get("node") or {}).get("uuid") or body.get("uuid")
        token = (body.get("config") or {}).get("agent_token")
    except AttributeError:
        return Taken("", None)
    usable = isinstance(token, str) and token and token != api.HIDDEN_TOKEN
    return Taken(uuid or "", token if usable else None)


def post_inventory(session, callback_url, inventory, verify=True, stop=lambda: False,
                   sleep=time.sleep, attempts=60):
    """POST {"inventory": ...} to Ironic's continue_inspection; what it answered (Taken), or
    None when Ironic never took it. Retried: the node may not be waiting yet."""
    headers = {"X-OpenStack-Ironic-API-Version": API_VERSION}
    for attempt in range(1, attempts + 1):
        if stop():
            return None
        try:
            resp = api.request(session, "POST", callback_url, json={"inventory": inventory},
                                   headers=headers, timeout=60, verify=verify)
        except requests.RequestException as exc:
            LOG.warning("Inspection: posting the inventory to %s failed (%s); again shortly",
                        redact.url(callback_url), type(exc).__name__)
        else:
            if resp.status_code in (200, 201, 202):
                try:
                    # 1.84 answers as lookup does ({"node": ..., "config": ...}); older,
                    # {"uuid": ...}
                    taken = _taken(resp.json() or {})
                except ValueError:
                    taken = Taken("", None)
                LOG.info("Inspection: Ironic took the inventory (%d disks) for node %s%s",
                         len(inventory.get("disks") or []), taken.uuid or None,
                         " and handed out its agent token" if taken.token else "")
                return taken
            LOG.warning("Inspection: Ironic answered %s: %s; again shortly", resp.status_code,
                        api.reason(resp))
            if resp.status_code in (400, 403):
                return None     # a refusal a retry will not change; the log says why
        sleep(min(5 * attempt, 30) * random.uniform(0.8, 1.2))
    return None
