"""Each NIC's router advertisement flags, read over netlink (provision_agent/agent/ra.py):
what ramdisk/netup.sh starts on it (dhclient -6, dhclient -6 -S, nothing)."""

import socket
import struct

from provision_agent.agent import ra


def _attr(kind, payload):
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _link(name, flags=None, index=2):
    attrs = _attr(ra.IFLA_IFNAME, name.encode() + b"\0")
    if flags is not None:
        attrs += _attr(ra.IFLA_PROTINFO | 0x8000,
                       _attr(ra.IFLA_INET6_FLAGS, struct.pack("=I", flags)))
    body = struct.pack("=BxHiII", socket.AF_INET6, 1, index, 0, 0) + attrs
    return struct.pack("=IHHII", 16 + len(body), ra.RTM_NEWLINK, 2, 1, 0) + body


DONE = struct.pack("=IHHII", 20, ra.NLMSG_DONE, 2, 1, 0) + b"\0" * 4


def test_flags_of_each_link_from_a_dump():
    data = _link("ens2", 0x80000000 | ra.IF_RA_RCVD | ra.IF_RA_MANAGED) + _link("lo") + DONE
    assert ra.parse_links(data) == ({"ens2": 0x80000060}, True)
    assert ra.parse_links(_link("ens3", 0))[1] is False      # the dump goes on


def test_modes():
    assert ra.mode(None) is None and ra.mode(0x80000000) is None     # no RA yet
    assert ra.mode(ra.IF_RA_RCVD) == "slaac"
    assert ra.mode(ra.IF_RA_RCVD | ra.IF_RA_OTHERCONF) == "other"
    assert ra.mode(ra.IF_RA_RCVD | ra.IF_RA_MANAGED | ra.IF_RA_OTHERCONF) == "managed"


def test_wait_returns_once_every_nic_heard_an_ra_or_at_the_deadline():
    now = [0.0]
    answers = iter([{"ens2": 0}, {"ens2": ra.IF_RA_RCVD | ra.IF_RA_MANAGED}])
    got = ra.wait(["ens2"], 10, read=lambda: next(answers), clock=lambda: now[0],
                  sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert got == {"ens2": "managed"} and now[0] == ra.POLL
    got = ra.wait(["ens2", "ens3"], 1, read=lambda: {"ens2": ra.IF_RA_RCVD},
                  clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert got == {"ens2": "slaac", "ens3": "none"}


def test_the_kernels_answer_here_parses():
    """This machine's own links, through a real RTM_GETLINK dump."""
    flags = ra.read_flags()
    assert "lo" in flags and all(isinstance(v, int) for v in flags.values())
