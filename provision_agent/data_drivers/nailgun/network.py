"""Fuel's `interfaces` as config-2 network_data, each field checked before it reaches the
installed system's network configuration (docs/nailgun-mapping.md, "Fields read")."""

import ipaddress
import re

MAC = re.compile(r"[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}")
# The kernel's IFNAMSIZ less its NUL; '/' and blanks cannot be in an interface name.
MAX_IFNAME = 15


def _ifname_ok(name):
    return 0 < len(name) <= MAX_IFNAME and name.isprintable() and \
        not any(c.isspace() or c == "/" for c in name)


def _ipv4(value):
    try:
        return ipaddress.IPv4Address(value)
    except ValueError:
        return None


def _netmask_ok(value):
    mask = _ipv4(value)
    if mask is None:
        return False
    host_bits = ~int(mask) & 0xFFFFFFFF
    return host_bits & (host_bits + 1) == 0       # the ones come first, then only zeros


def _checked(name, spec, problem):
    """True when the interface's fields are what they claim to be; each bad one reported."""
    where = f"interfaces.{name}"
    ok = True
    if not MAC.fullmatch(spec["mac_address"]):
        problem(f"{where}.mac_address", "not a MAC address (six hex octets separated by colons, "
                                        "52:54:00:12:34:56)")
        ok = False
    if spec.get("ip_address") and _ipv4(spec["ip_address"]) is None:
        problem(f"{where}.ip_address", "not an IPv4 address (10.20.0.7)")
        ok = False
    if spec.get("netmask") and not _netmask_ok(spec["netmask"]):
        problem(f"{where}.netmask", "not an IPv4 netmask (255.255.255.0)")
        ok = False
    return ok


def network_data(interfaces, problem):
    """Fuel's interfaces (name → mac_address, ip_address, netmask, static) as config-2 links."""
    links, networks = [], []
    for name, spec in sorted((interfaces or {}).items()):
        if not isinstance(spec, dict) or not spec.get("mac_address"):
            continue
        if not _ifname_ok(name):
            problem("interfaces", f"an interface name is 1 to {MAX_IFNAME} printable characters "
                                  "without blanks or '/'")
            continue
        if not _checked(name, spec, problem):
            continue
        links.append({"id": name, "type": "phy", "ethernet_mac_address": spec["mac_address"]})
        if spec.get("ip_address") and spec.get("static") in (1, "1", True):
            networks.append({"id": f"net-{name}", "link": name, "type": "ipv4",
                             "ip_address": spec["ip_address"],
                             "netmask": spec.get("netmask") or "255.255.255.0"})
        else:
            networks.append({"id": f"net-{name}", "link": name, "type": "ipv4_dhcp"})
    return {"links": links, "networks": networks, "services": []} if links else None
