"""What each NIC's router advertisement asks of DHCPv6, for ramdisk/init.

IPv6 addresses come two ways, and the router advertisement (RA) says which: its prefixes with
the A flag give addresses by SLAAC, which the kernel does itself (accept_ra), and its M
("managed") flag says addresses come from a DHCPv6 server, its O ("other") flag that only
other settings (DNS) do. The kernel keeps the flags of the last RA a NIC received
(IF_RA_RCVD, IF_RA_MANAGED, IF_RA_OTHERCONF in the NIC's inet6 flags, which an RTM_GETLINK
dump of the AF_INET6 family returns as IFLA_PROTINFO/IFLA_INET6_FLAGS); iproute2 does not
print them, so they are read here over netlink.

    python3 -m provision_agent.agent.ra --wait SECONDS NIC...

waits until every NIC received an RA, or SECONDS passed, and prints one line per NIC:
`NIC managed` (stateful DHCPv6: init runs `dhclient -6`), `NIC other` (stateless DHCPv6:
`dhclient -6 -S`), `NIC slaac` (an RA with neither flag: the kernel's SLAAC alone) or
`NIC none` (no RA in time: no IPv6 beyond the link-local address).

Bounded: each netlink answer is read in chunks of at most READ_BYTES, at most MAX_MESSAGES
messages a dump.
"""

import argparse
import socket
import struct
import sys
import time

NETLINK_ROUTE = 0
RTM_NEWLINK = 16
RTM_GETLINK = 18
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
IFLA_IFNAME = 3
IFLA_PROTINFO = 12
IFLA_INET6_FLAGS = 1
# include/net/if_inet6.h
IF_RA_OTHERCONF = 0x80
IF_RA_MANAGED = 0x40
IF_RA_RCVD = 0x20

READ_BYTES = 65536
MAX_MESSAGES = 4096
POLL = 0.25

_NLMSG = struct.Struct("=IHHII")     # nlmsghdr: len, type, flags, seq, pid
_IFINFO = struct.Struct("=BxHiII")   # ifinfomsg: family, type, index, flags, change
_RTA = struct.Struct("=HH")          # rtattr: len, type


def _attrs(data):
    """{type: payload} of a run of netlink attributes (rtattr, 4-byte aligned)."""
    found, pos = {}, 0
    while pos + _RTA.size <= len(data):
        length, kind = _RTA.unpack_from(data, pos)
        if length < _RTA.size or pos + length > len(data):
            break
        found[kind & 0x3fff] = data[pos + _RTA.size:pos + length]
        pos += (length + 3) & ~3
    return found


def parse_links(data):
    """{name: inet6 flags} of the RTM_NEWLINK messages in a netlink answer; True at the end
    when the answer holds the dump's NLMSG_DONE."""
    flags, pos, done = {}, 0, False
    while pos + _NLMSG.size <= len(data):
        length, kind, _, _, _ = _NLMSG.unpack_from(data, pos)
        if length < _NLMSG.size or pos + length > len(data):
            break
        body = data[pos + _NLMSG.size:pos + length]
        pos += (length + 3) & ~3
        if kind in (NLMSG_DONE, NLMSG_ERROR):
            done = True
            break
        if kind != RTM_NEWLINK or len(body) < _IFINFO.size:
            continue
        attrs = _attrs(body[_IFINFO.size:])
        name = attrs.get(IFLA_IFNAME, b"").split(b"\0", 1)[0].decode(errors="replace")
        inet6 = _attrs(attrs.get(IFLA_PROTINFO, b"")).get(IFLA_INET6_FLAGS, b"")
        if name and len(inet6) >= 4:
            flags[name] = struct.unpack_from("=I", inet6)[0]
    return flags, done


def read_flags():
    """{NIC name: inet6 flags} of every interface, from one RTM_GETLINK dump."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE) as s:
        s.settimeout(5)
        request = _NLMSG.pack(_NLMSG.size + _IFINFO.size, RTM_GETLINK,
                              NLM_F_REQUEST | NLM_F_DUMP, 1, 0) \
            + _IFINFO.pack(socket.AF_INET6, 0, 0, 0, 0)
        s.sendto(request, (0, 0))
        flags = {}
        for _ in range(MAX_MESSAGES):
            chunk, done = parse_links(s.recv(READ_BYTES))
            flags.update(chunk)
            if done:
                break
        return flags


def mode(flags):
    """What an NIC's inet6 flags say of DHCPv6; None before its first RA."""
    if flags is None or not flags & IF_RA_RCVD:
        return None
    if flags & IF_RA_MANAGED:
        return "managed"
    if flags & IF_RA_OTHERCONF:
        return "other"
    return "slaac"


def wait(nics, seconds, read=read_flags, clock=time.monotonic, sleep=time.sleep):
    """{nic: mode} once every NIC received an RA or seconds passed ("none" for the rest)."""
    deadline = clock() + seconds
    modes = {}
    while True:
        flags = read()
        modes = {n: mode(flags.get(n)) for n in nics}
        if all(modes.values()) or clock() >= deadline:
            return {n: m or "none" for n, m in modes.items()}
        sleep(POLL)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m provision_agent.agent.ra",
                                description="Wait for each NIC's IPv6 router advertisement "
                                            "and say what it asks of DHCPv6 (ramdisk/init).")
    p.add_argument("--wait", type=float, default=10, help="Seconds to wait at most.")
    p.add_argument("nics", nargs="+")
    args = p.parse_args(argv)
    try:
        modes = wait(args.nics, args.wait)
    except OSError as exc:
        print(f"cannot read the NICs' IPv6 flags: {exc}", file=sys.stderr)
        modes = {n: "none" for n in args.nics}
    for nic, found in modes.items():
        print(nic, found)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
