"""What the ramdisk tells Ironic about the machine it runs on: its kernel command line, its
NICs, the address the conductor reaches it at, its SSH host key."""

import ipaddress
import os
import socket
import urllib.parse

from provision_agent.agent.api import AgentError

DEFAULT_HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"
MAX_PARAM = 4096            # a kernel command line is at most a few KiB


def kernel_params(text):
    """`key=value` words of a kernel command line (bare words map to ''); the last one wins,
    as for the kernel itself."""
    params = {}
    for word in text.split():
        key, _, value = word.partition("=")
        if len(value) <= MAX_PARAM:
            params[key] = value
    return params


def ethernet_nics(sysfs="/sys/class/net"):
    """[(name, MAC)] of the machine's Ethernet NICs (virtual ones without a device are left
    out: a bridge or a bond does not name a port Ironic knows)."""
    nics = []
    for name in sorted(os.listdir(sysfs)):
        path = os.path.join(sysfs, name)
        try:
            with open(os.path.join(path, "type")) as f:
                if f.read().strip() != "1":
                    continue
            if not os.path.exists(os.path.join(path, "device")):
                continue
            with open(os.path.join(path, "address")) as f:
                mac = f.read().strip().lower()
        except OSError:
            continue
        if mac and mac != "00:00:00:00:00:00":
            nics.append((name, mac))
    return nics


def mac_addresses(sysfs="/sys/class/net"):
    """MACs of the machine's Ethernet NICs, what the node is looked up by."""
    return [mac for _name, mac in ethernet_nics(sysfs)]


def source_address(api_url):
    """The address this machine sends from towards the API: the one the conductor, on the
    same network, can reach (no packet is sent: connect() on UDP only picks the route)."""
    parsed = urllib.parse.urlsplit(api_url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    family, _, _, _, sockaddr = socket.getaddrinfo(parsed.hostname, port,
                                                   type=socket.SOCK_DGRAM)[0]
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect(sockaddr)
        return s.getsockname()[0]


def callback_url(address, ssh_port):
    # https: Ironic (39: [agent]require_tls on by default) refuses other schemes, and what
    # the URL leads to is encrypted and authenticated by the key in agent_verify_ca: SSH with
    # that host key pinned. Nothing speaks HTTP there.
    host = f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    return f"https://{host}:{ssh_port}"


def read_host_key(path):
    with open(path) as f:
        fields = f.read().split()
    if len(fields) < 2:
        raise AgentError(f"{path} is not an SSH public key")
    return f"{fields[0]} {fields[1]}"
