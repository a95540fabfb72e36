"""IPv6 literals in the URLs a document names (issue 62): a well-formed one passes the dry run,
a malformed one (or an IPv6 address without brackets, an IPv4 one in them, a bad port) is
refused with its field, exit 2, before anything is fetched; the URL itself is not quoted."""

import pytest

from provision_agent.plan import urls
from tests.unit.helpers import mutate, run_cli, sample

SUM = "sha256:" + "ab" * 32


def image(**kw):
    """The document's one image, with kw's fields (None: left out)."""
    entry = dict({"uri": "http://[fd00::1]:8080/i.tar", "format": "tar", "target": "/",
                  "checksum": SUM}, **kw)
    entry = {k: v for k, v in entry.items() if v is not None}
    return lambda d: d.__setitem__("images", [entry])


@pytest.mark.parametrize("change", [
    image(),
    image(uri="https://user:pw@[FD00:0::1]/i.tar?sig=x"),
    image(uri="http://[fe80::1%25eth0]:80/i.tar"),
    image(checksum=None, checksum_url="http://[2001:db8::5]/SHA256SUMS"),
    lambda d: d.__setitem__("configdrive", {"content": "http://[fd00::1]:8080/cd.iso.gz",
                                            "disk": "disk0"}),
])
def test_ipv6_literals_pass(tmp_path, change):
    rc, _, err = run_cli(tmp_path, mutate(sample("two-disk-raid-lvm"), change))
    assert rc == 0, err


@pytest.mark.parametrize("change,expected", [
    (image(uri="http://[fd00::zz]:8080/i.tar?sig=SECRET"),
     "images[0]: uri: [fd00::zz] is not an IPv6 address"),
    (image(uri="http://[fd00::1:8080/i.tar"),
     "images[0]: uri: the IPv6 literal '[fd00::1:8080' has no closing ']'"),
    (image(uri="http://fd00::1/i.tar"),
     "images[0]: uri: 'fd00::1' looks like an IPv6 address: in a URL it goes in brackets"),
    (image(uri="http://[10.0.0.1]/i.tar"),
     "images[0]: uri: [10.0.0.1] is an IPv4 address: only IPv6 addresses go in brackets"),
    (image(uri="http://[fd00::1]:99999/i.tar"),
     "images[0]: uri: the port after '[fd00::1]' is not a number from 1 to 65535"),
    (image(uri="http://[fd00::1]x/i.tar"),
     "images[0]: uri: 'x' after the IPv6 literal [fd00::1] is not ':PORT'"),
    (image(uri="http://10.0.0.300/i.tar"), "images[0]: uri: '10.0.0.300' is not an IPv4 address"),
    (image(checksum=None, checksum_url="http://[2001:db8:::5]/SHA256SUMS"),
     "images[0]: checksum_url: [2001:db8:::5] is not an IPv6 address"),
    (image(signature="https://[2001:db8::g]/i.sig"),
     "images[0]: signature: [2001:db8::g] is not an IPv6 address"),
    (lambda d: d.__setitem__("configdrive", {"content": "http://[fd00::1/cd.iso.gz",
                                             "disk": "disk0"}),
     "configdrive: configdrive URL: the IPv6 literal '[fd00::1' has no closing ']'"),
])
def test_malformed_literals_are_refused_with_their_place(tmp_path, change, expected):
    rc, _, err = run_cli(tmp_path, mutate(sample("two-disk-raid-lvm"), change))
    assert rc == 2, err
    assert expected in err
    assert "SECRET" not in err


def test_key_file_and_tang_urls(tmp_path):
    def change(d):
        enc = d["encrypted"][0]
        enc["unlock"] = {"tang": [{"url": "http://[fd00::7]:7500", "thumbprint": "x" * 43},
                                  {"url": "http://[fd00::7:7500", "thumbprint": "y" * 43}]}
    rc, _, err = run_cli(tmp_path, mutate(sample("encrypted-raid1-lvm"), change),
                         "three-disks")
    assert rc == 2, err
    assert "unlock.tang[1].url: the IPv6 literal '[fd00::7:7500' has no closing ']'" in err
    assert "unlock.tang[0]" not in err


@pytest.mark.parametrize("text,problem", [
    ("fd00::5", None), ("FD00:0::5", None), ("192.0.2.7", None), ("node-1.example.org", None),
    ("fe80::1%eth0", None),
    ("[fd00::5]", "write an IPv6 address without brackets here"),
    ("fd00::5::1", "is not an IPv6 address"), ("192.0.2.700", "is not an IPv4 address"),
    ("no_underscores.example", "is not an IP address or a host name"), ("", "it is empty"),
])
def test_address_problem(text, problem):
    found = urls.address_problem(text)
    assert (found is None) if problem is None else (problem in found), found


def test_canonical_address():
    assert urls.canonical_address("FD00:0:0::0005") == "fd00::5"
    assert urls.canonical_address("node-1.example.org") == "node-1.example.org"
