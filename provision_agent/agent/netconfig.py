"""The ramdisk's network from Nova's network_data.json, for boots without DHCP.

Ironic's virtual-media boot interfaces put the node's `network_data` on the ISO they build
(openstack/latest/network_data.json, volume label config-2; image_utils.prepare_deploy_iso).
ramdisk/init finds it on the boot medium and runs this instead of DHCP for the NICs it
names: a link is matched to a NIC by its MAC, and each of the link's networks gives it a
static address (`ipv4`/`ipv6`: ip_address, netmask, routes) or leaves it to DHCP
(`ipv4_dhcp`, ...). DNS servers come from `services` (top level or the network's).

    python3 -m provision_agent.agent.netconfig --network_data FILE

configures what it can through the runner, says on stderr (init's console) what it did, and
prints on stdout the names of the NICs it configured, which init then leaves out of DHCP.
A file it cannot use (too large, not JSON, a value of the wrong type or not an address)
changes nothing, exits 1, and init does DHCP everywhere as before. Links it has no NIC for,
and bonds and VLANs (not built here), are named and left alone.

Bounded: at most MAX_BYTES read, MAX_ITEMS entries per list, short strings; every check is a
parse of one value (ipaddress, an anchored MAC pattern), linear in its length.
"""

import argparse
import ipaddress
import json
import re
import sys
from dataclasses import dataclass, field

MAX_BYTES = 1 << 20
MAX_ITEMS = 256
MAX_TEXT = 255
MAC_RE = re.compile(r"[0-9a-f]{2}(?::[0-9a-f]{2}){5}")
STATIC = {"ipv4": 4, "ipv6": 6}
DHCP = {"ipv4_dhcp", "ipv6_dhcp", "ipv6_slaac", "ipv6_dhcpv6-stateful",
        "ipv6_dhcpv6-stateless"}
NOT_BUILT = {"bond", "vlan"}      # link types made of other links: not configured here
RESOLV_CONF = "/etc/resolv.conf"


class Unusable(ValueError):
    """The file is not network_data init can trust: DHCP everywhere instead."""


@dataclass
class Nic:
    name: str
    mac: str
    mtu: int | None = None
    addresses: list = field(default_factory=list)     # ip_interface objects
    routes: list = field(default_factory=list)        # (ip_network, gateway address)
    dhcp: bool = False


@dataclass
class Plan:
    nics: dict = field(default_factory=dict)          # name -> Nic
    dns: list = field(default_factory=list)
    notes: list = field(default_factory=list)         # what was left alone, and why


def _list(doc, key, where):
    value = doc.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list):
        raise Unusable(f"{where}{key} is not a list")
    if len(value) > MAX_ITEMS:
        raise Unusable(f"{where}{key} has {len(value)} entries (at most {MAX_ITEMS})")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise Unusable(f"{where}{key}[{i}] is not an object")
    return value


def _text(obj, key, where, required=True):
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
        raise Unusable(f"{where}.{key} is not a string of 1-{MAX_TEXT} characters")
    return value


# What Linux takes as an interface name (dev_valid_name: fewer than IFNAMSIZ = 16 bytes, not
# "." or "..", no "/", ":" or blank), narrowed to printable ASCII; a number (an interface
# index) is one too. An IPv6 scope id must be one: ipaddress takes any text after "%", and
# str() of the address writes it into resolv.conf, where a newline starts a `search` or
# `options` line of the file's author's choosing, and onto the console.
IFNAME_RE = re.compile(r"[!-~]{1,15}")


def _scope_problem(scope):
    if not IFNAME_RE.fullmatch(scope) or scope in (".", "..") or "/" in scope or ":" in scope:
        return f"its scope id {scope!r} is not an interface name (1-15 printable ASCII " \
               "characters, no '/' or ':')"
    return None


def _address(text, where, version=None):
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        raise Unusable(f"{where}: {text!r} is not an IP address") from None
    problem = _scope_problem(addr.scope_id) if getattr(addr, "scope_id", None) else None
    if problem:
        raise Unusable(f"{where}: {problem}")
    if version and addr.version != version:
        raise Unusable(f"{where}: {text!r} is not an IPv{version} address")
    return addr


def _prefix(netmask, version, where):
    """A prefix length from a netmask (dotted, or IPv6 form) or a prefix length."""
    if isinstance(netmask, bool) or not isinstance(netmask, (str, int)):
        raise Unusable(f"{where}: the netmask is not a string")
    text = str(netmask)
    if text.isdigit() and len(text) <= 3:
        bits = int(text)
    else:
        mask = int(_address(text, where, version))
        width = 32 if version == 4 else 128
        bits = bin(mask).count("1")
        if mask != ((1 << bits) - 1) << (width - bits):
            raise Unusable(f"{where}: netmask {text} is not contiguous")
    if bits > (32 if version == 4 else 128):
        raise Unusable(f"{where}: prefix /{bits} is too long for IPv{version}")
    return bits


def _interface(net, version, where):
    text = _text(net, "ip_address", where)
    address, _, inline = text.partition("/")
    _address(address, f"{where}.ip_address", version)
    if net.get("netmask") is not None:
        bits = _prefix(net["netmask"], version, f"{where}.netmask")
    elif inline:
        bits = _prefix(inline, version, f"{where}.ip_address")
    else:
        raise Unusable(f"{where}: no netmask for {address}")
    return ipaddress.ip_interface(f"{address}/{bits}")


def _routes(net, version, where):
    routes = []
    for j, route in enumerate(_list(net, "routes", f"{where}.")):
        at = f"{where}.routes[{j}]"
        network = _address(_text(route, "network", at), f"{at}.network", version)
        bits = _prefix(route.get("netmask", "0"), version, f"{at}.netmask")
        gateway = _address(_text(route, "gateway", at), f"{at}.gateway", version)
        routes.append((ipaddress.ip_network(f"{network}/{bits}", strict=False), gateway))
    return routes


def _dns(services, where):
    found = []
    for i, service in enumerate(services):
        if service.get("type") == "dns":
            found.append(_address(_text(service, "address", f"{where}[{i}]"),
                                  f"{where}[{i}].address"))
    return found


def plan(doc, macs):
    """What to configure: doc is the parsed network_data, macs {MAC: NIC name} of this
    machine. Raises Unusable for a document that cannot be trusted as a whole."""
    if not isinstance(doc, dict):
        raise Unusable("the document is not a JSON object")
    result = Plan()
    links = _links(doc, macs, result)
    for i, net in enumerate(_list(doc, "networks", "")):
        _network(net, f"networks[{i}]", links, result)
    result.dns.extend(d for d in _dns(_list(doc, "services", ""), "services")
                      if d not in result.dns)
    return result


def _links(doc, macs, result):
    """{link id: the Nic it configures, or None for a link left alone}"""
    links = {}
    for i, link in enumerate(_list(doc, "links", "")):
        where = f"links[{i}]"
        link_id = _text(link, "id", where)
        kind = _text(link, "type", where, required=False) or "phy"
        if kind in NOT_BUILT:
            result.notes.append(f"link {link_id}: type {kind} is not built by the ramdisk")
            links[link_id] = None
            continue
        mac = _text(link, "ethernet_mac_address", where).lower()
        if not MAC_RE.fullmatch(mac):
            raise Unusable(f"{where}.ethernet_mac_address {mac!r} is not a MAC address")
        mtu = link.get("mtu")
        if mtu is not None and (not isinstance(mtu, int) or isinstance(mtu, bool)
                                or not 68 <= mtu <= 65535):
            raise Unusable(f"{where}.mtu is not a number from 68 to 65535")
        name = macs.get(mac)
        if name is None:
            result.notes.append(f"link {link_id}: no NIC with MAC {mac} here")
            links[link_id] = None
            continue
        links[link_id] = result.nics.setdefault(name, Nic(name, mac, mtu))
    return links


def _network(net, where, links, result):
    link_id = _text(net, "link", where)
    kind = _text(net, "type", where)
    if link_id not in links:
        raise Unusable(f"{where}.link {link_id!r} names no link")
    version = STATIC.get(kind)
    if version is None and kind not in DHCP:
        raise Unusable(f"{where}.type {kind!r} is not a network type of network_data")
    # Checked even for a link left alone: a broken entry means a broken file.
    address = _interface(net, version, where) if version else None
    routes = _routes(net, version, where) if version else []
    dns = _dns(_list(net, "services", f"{where}."), f"{where}.services")
    nic = links[link_id]
    if nic is None:
        return
    if version:
        nic.addresses.append(address)
        nic.routes.extend(routes)
    elif kind == "ipv4_dhcp":
        # a NIC left to DHCP goes through init's netup.sh: IPv4 DHCP, and SLAAC and DHCPv6
        # as its router advertises (never DHCPv6 over a static IPv6 address). The IPv6 types
        # need nothing here: the kernel's SLAAC runs on a static NIC too, DHCPv6 does not.
        nic.dhcp = True
    result.dns.extend(d for d in dns if d not in result.dns)


def load(path):
    """The parsed file, read at most MAX_BYTES; Unusable when it is not JSON."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise Unusable(f"cannot read it: {exc.strerror}") from None
    if len(data) > MAX_BYTES:
        raise Unusable(f"it is larger than {MAX_BYTES} bytes")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise Unusable(f"it is not JSON ({type(exc).__name__})") from None


def machine_macs(sysfs="/sys/class/net"):
    """{MAC: name} of the physical Ethernet NICs, the ones the agent looks the node up by."""
    from provision_agent.agent.host import ethernet_nics
    names = {}
    for name, mac in ethernet_nics(sysfs):
        names.setdefault(mac, name)
    return names


def apply(result, runner, resolv_conf=RESOLV_CONF):
    """Configures the planned NICs; returns the names of those that have a static address
    (what init leaves out of DHCP). A command that fails is said and the rest goes on."""
    from provision_agent.errors import CommandError
    done = []
    for nic in result.nics.values():
        steps = [["ip", "link", "set", "dev", nic.name, "up"]]
        if nic.mtu:
            steps.insert(0, ["ip", "link", "set", "dev", nic.name, "mtu", str(nic.mtu)])
        steps += [["ip", "addr", "add", str(a), "dev", nic.name] for a in nic.addresses]
        steps += [["ip", f"-{net.version}", "route", "replace", str(net), "via", str(gw),
                   "dev", nic.name] for net, gw in nic.routes]
        try:
            for argv in steps:
                runner.run(argv, timeout=30)
        except CommandError as exc:
            _say(f"{nic.name}: {exc}")
            continue
        if nic.addresses and not nic.dhcp:
            done.append(nic.name)
        _say(f"{nic.name} ({nic.mac}): "
             + (", ".join(str(a) for a in nic.addresses) or "no static address")
             + (f", mtu {nic.mtu}" if nic.mtu else "")
             + "".join(f", route {net} via {gw}" for net, gw in nic.routes)
             + (", DHCP too" if nic.dhcp else ""))
    if result.dns:
        with open(resolv_conf, "w") as f:
            f.writelines(f"nameserver {d}\n" for d in result.dns[:3])
        _say("dns: " + ", ".join(str(d) for d in result.dns[:3]))
    for note in result.notes:
        _say(note)
    return done


def _say(text):
    """One console line: the file's text (a link's id, a name) and a command's stderr are
    whoever wrote them's, so their line breaks become "; " and any other character that is
    not printable (escape sequences, C1 controls) a "?"."""
    text = "; ".join(str(text).splitlines())
    print("network_data: " + "".join(c if c.isprintable() else "?" for c in text),
          file=sys.stderr)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m provision_agent.agent.netconfig",
                                description="Configure this machine's NICs from Nova's "
                                            "network_data.json (the ramdisk's init runs it).")
    p.add_argument("--network_data", required=True, help="The network_data.json file.")
    p.add_argument("--sysfs", default="/sys/class/net", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        result = plan(load(args.network_data), machine_macs(args.sysfs))
    except Unusable as exc:
        _say(f"{args.network_data} is not usable ({exc}); DHCP on every NIC instead")
        return 1
    from provision_agent.run.runner import Runner
    for name in apply(result, Runner(), resolv_conf=RESOLV_CONF):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
