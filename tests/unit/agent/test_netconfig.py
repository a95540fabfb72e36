"""The ramdisk's static network from network_data.json (provision_agent/agent/netconfig.py): what a
Nova/Ironic document configures, and that a file it cannot trust changes nothing (init then
does DHCP). The virtual-media boot that uses it is tests/ironic/lab/test_vmedia.py."""

import json
import time

import pytest

from provision_agent.agent import netconfig
from tests.unit.fakes import FakeRunner

MAC = "52:54:00:5b:01:00"
OTHER = "52:54:00:5b:01:01"
MACS = {MAC: "ens2", OTHER: "ens3"}
# As Ironic's API documents a node's network_data (and Nova writes it), with a route and DNS.
DOC = {
    "links": [{"id": "port-0", "type": "phy", "ethernet_mac_address": MAC.upper(),
               "mtu": 1450}],
    "networks": [{"id": "provisioning", "type": "ipv4", "link": "port-0",
                  "ip_address": "10.251.200.100", "netmask": "255.255.255.0",
                  "routes": [{"network": "198.51.100.0", "netmask": "255.255.255.0",
                              "gateway": "10.251.200.1"}],
                  "network_id": "provisioning"}],
    "services": [{"type": "dns", "address": "10.251.200.1"}],
}


def _copy():
    return json.loads(json.dumps(DOC))


def test_a_static_ipv4_link_matched_by_mac():
    plan = netconfig.plan(DOC, MACS)
    nic = plan.nics["ens2"]
    assert [str(a) for a in nic.addresses] == ["10.251.200.100/24"]
    assert [(str(n), str(g)) for n, g in nic.routes] == [("198.51.100.0/24", "10.251.200.1")]
    assert nic.mtu == 1450 and not nic.dhcp
    assert [str(d) for d in plan.dns] == ["10.251.200.1"]
    assert "ens3" not in plan.nics      # not named: left to DHCP


def test_applied_through_the_runner_and_named_for_init(tmp_path, capsys):
    runner = FakeRunner()
    resolv = tmp_path / "resolv.conf"
    done = netconfig.apply(netconfig.plan(DOC, MACS), runner, resolv_conf=resolv)
    assert done == ["ens2"]
    assert runner.lines() == [
        "ip link set dev ens2 mtu 1450", "ip link set dev ens2 up",
        "ip addr add 10.251.200.100/24 dev ens2",
        "ip -4 route replace 198.51.100.0/24 via 10.251.200.1 dev ens2"]
    assert resolv.read_text() == "nameserver 10.251.200.1\n"
    said = capsys.readouterr().err
    assert "network_data: ens2 (52:54:00:5b:01:00): 10.251.200.100/24, mtu 1450, route " \
           "198.51.100.0/24 via 10.251.200.1" in said


def test_a_failed_command_leaves_that_nic_to_dhcp(capsys):
    runner = FakeRunner(fail=("ip addr add",))
    assert netconfig.apply(netconfig.plan(DOC, MACS), runner, resolv_conf="/dev/null") == []
    assert "simulated failure" in capsys.readouterr().err


def test_ipv6_netmask_forms_a_default_route_and_dhcp_types():
    doc = _copy()
    doc["networks"] = [
        {"id": "v6", "type": "ipv6", "link": "port-0", "ip_address": "2001:db8::5",
         "netmask": "ffff:ffff:ffff:ffff::",
         "routes": [{"network": "::", "netmask": "::", "gateway": "2001:db8::1"}]},
        {"id": "v6b", "type": "ipv6", "link": "port-0", "ip_address": "2001:db8:1::5/80"},
        {"id": "slaac", "type": "ipv6_slaac", "link": "port-0"},
        {"id": "v4", "type": "ipv4_dhcp", "link": "port-0"}]
    nic = netconfig.plan(doc, MACS).nics["ens2"]
    assert [str(a) for a in nic.addresses] == ["2001:db8::5/64", "2001:db8:1::5/80"]
    assert [(str(n), str(g)) for n, g in nic.routes] == [("::/0", "2001:db8::1")]
    assert nic.dhcp
    # a NIC that also wants DHCP is not taken out of init's DHCP
    assert netconfig.apply(netconfig.plan(doc, MACS), FakeRunner(), "/dev/null") == []


def test_links_without_a_nic_here_and_bonds_are_named_and_left_alone():
    doc = _copy()
    doc["links"] += [{"id": "gone", "type": "phy", "ethernet_mac_address": "52:54:00:ff:ff:ff"},
                     {"id": "bond0", "type": "bond", "bond_links": ["port-0"]}]
    doc["networks"].append({"id": "b", "type": "ipv4", "link": "bond0",
                            "ip_address": "192.0.2.5", "netmask": "255.255.255.0"})
    plan = netconfig.plan(doc, MACS)
    assert list(plan.nics) == ["ens2"]
    assert plan.notes == ["link gone: no NIC with MAC 52:54:00:ff:ff:ff here",
                          "link bond0: type bond is not built by the ramdisk"]


@pytest.mark.parametrize("change,reason", [
    (lambda d: d.update(links={"id": "x"}), "links is not a list"),
    (lambda d: d["links"][0].update(ethernet_mac_address="52:54:00"), "is not a MAC address"),
    (lambda d: d["links"][0].update(mtu="1500"), "mtu is not a number"),
    (lambda d: d["networks"][0].update(ip_address="10.251.200.300"), "is not an IP address"),
    (lambda d: d["networks"][0].update(ip_address="2001:db8::5"), "is not an IPv4 address"),
    (lambda d: d["networks"][0].update(netmask="255.0.255.0"), "is not contiguous"),
    (lambda d: d["networks"][0].update(netmask="33"), "too long for IPv4"),
    (lambda d: d["networks"][0].update(netmask=["255.255.255.0"]), "netmask is not a string"),
    (lambda d: d["networks"][0].pop("netmask"), "no netmask"),
    (lambda d: d["networks"][0].update(link="nowhere"), "names no link"),
    (lambda d: d["networks"][0].update(type="ipv5"), "is not a network type"),
    (lambda d: d["networks"][0]["routes"][0].update(gateway=None), "gateway is not a string"),
    (lambda d: d["services"][0].update(address="dns.example"), "is not an IP address"),
    (lambda d: d["networks"].extend([{}] * 300), "at most 256"),
    # IPv6 static addresses (issue 62): a malformed literal anywhere, with its place
    (lambda d: d["networks"][0].update(type="ipv6", ip_address="2001:db8::zz", netmask="64"),
     r"networks\[0\].ip_address: '2001:db8::zz' is not an IP address"),
    (lambda d: d["networks"][0].update(type="ipv6", ip_address="2001:db8::5",
                                       netmask="ffff:ffff::ff"),
     r"networks\[0\].netmask: netmask ffff:ffff::ff is not contiguous"),
    (lambda d: d["networks"][0].update(type="ipv6", ip_address="2001:db8::5/64", netmask=None,
                                       routes=[{"network": "::", "netmask": "0",
                                                "gateway": "2001:db8:::1"}]),
     r"networks\[0\].routes\[0\].gateway: '2001:db8:::1' is not an IP address"),
    (lambda d: d["networks"][0].update(type="ipv6", ip_address="10.251.200.100"),
     "is not an IPv6 address"),
    (lambda d: d["links"][0].update(id="x" * 300), "is not a string of 1-255"),
])
def test_a_malformed_document_is_refused_as_a_whole(change, reason):
    doc = _copy()
    change(doc)
    with pytest.raises(netconfig.Unusable, match=reason):
        netconfig.plan(doc, MACS)


def test_a_broken_entry_on_a_link_left_alone_still_refuses_the_file():
    doc = _copy()
    doc["links"][0]["ethernet_mac_address"] = "52:54:00:ff:ff:ff"
    doc["networks"][0]["ip_address"] = "not-an-address"
    with pytest.raises(netconfig.Unusable):
        netconfig.plan(doc, MACS)


@pytest.mark.parametrize("data,reason", [
    (b"{\"links\": [", "not JSON"),
    (b"\xff\xfe{}", "not JSON"),
    (b"[" * 100000 + b"]" * 100000, "not JSON"),
    (b" " * (netconfig.MAX_BYTES + 1), "larger than"),
])
def test_an_unreadable_file_is_refused_quickly(tmp_path, data, reason):
    path = tmp_path / "network_data.json"
    path.write_bytes(data)
    t = time.monotonic()
    with pytest.raises(netconfig.Unusable, match=reason):
        netconfig.load(path)
    assert time.monotonic() - t < 2


def test_main_falls_back_to_dhcp_with_a_console_message(tmp_path, capsys):
    path = tmp_path / "network_data.json"
    path.write_text("{not json")
    assert netconfig.main(["--network_data", str(path), "--sysfs", str(tmp_path)]) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert "is not usable (it is not JSON (JSONDecodeError)); DHCP on every NIC instead" \
        in out.err


def test_main_reads_the_machines_nics_from_sysfs(tmp_path, monkeypatch, capsys):
    for name, mac in (("ens2", MAC), ("br0", "52:54:00:00:00:09")):
        d = tmp_path / "net" / name
        d.mkdir(parents=True)
        (d / "type").write_text("1\n")
        (d / "address").write_text(mac + "\n")
    (tmp_path / "net" / "ens2" / "device").mkdir()      # br0 has none: not a NIC
    path = tmp_path / "network_data.json"
    path.write_text(json.dumps(DOC))
    runner = FakeRunner()
    monkeypatch.setattr("provision_agent.run.runner.Runner", lambda: runner)
    monkeypatch.setattr(netconfig, "RESOLV_CONF", str(tmp_path / "resolv.conf"))
    assert netconfig.main(["--network_data", str(path), "--sysfs",
                           str(tmp_path / "net")]) == 0
    assert capsys.readouterr().out == "ens2\n"
    assert "ip addr add 10.251.200.100/24 dev ens2" in runner.lines()


# Issue 52 item 13: an IPv6 scope id ("%...") is text Python's ipaddress takes as it is, and
# str() of the address carries it into resolv.conf and onto the console.
INJECTED = "fe80::1%eth0\nsearch evil.example\noptions ndots:15 rotate"


@pytest.mark.parametrize("scope", [
    "eth0\nsearch evil.example", "eth0 rotate", "eth0\toptions", "a" * 16, "eth0:1",
    ".", "..", "eth\x1b[2J", "eth\x85", "ethé"])
def test_a_scope_id_that_is_not_an_interface_name_refuses_the_file(scope):
    doc = _copy()
    doc["services"][0]["address"] = f"fe80::1%{scope}"
    with pytest.raises(netconfig.Unusable, match="scope id .* is not an interface name"):
        netconfig.plan(doc, MACS)


def test_a_scope_id_cannot_write_lines_into_resolv_conf(tmp_path):
    doc = _copy()
    doc["services"] = [{"type": "dns", "address": INJECTED}]
    path, resolv = tmp_path / "network_data.json", tmp_path / "resolv.conf"
    path.write_text(json.dumps(doc))
    try:
        netconfig.apply(netconfig.plan(netconfig.load(path), MACS), FakeRunner(),
                        resolv_conf=resolv)
    except netconfig.Unusable:
        pass
    text = resolv.read_text() if resolv.exists() else ""
    assert [ln for ln in text.splitlines() if not ln.startswith("nameserver ")] == [], text


@pytest.mark.parametrize("scope", ["eth0", "ens2", "enp0s31f6", "2", "a" * 15, "eth-0_1.v@x"])
def test_a_scope_id_that_is_an_interface_name_or_index_is_kept(scope, tmp_path):
    doc = _copy()
    doc["services"][0]["address"] = f"fe80::1%{scope}"
    plan = netconfig.plan(doc, MACS)
    resolv = tmp_path / "resolv.conf"
    netconfig.apply(plan, FakeRunner(), resolv_conf=resolv)
    assert resolv.read_text() == f"nameserver fe80::1%{scope}\n"


def test_control_characters_do_not_reach_the_console(capsys):
    doc = _copy()
    doc["links"].append({"id": "gone\x1b]0;owned\x07\x1b[2J\r\x9b31m",
                         "ethernet_mac_address": "52:54:00:ff:ff:ff"})
    netconfig.apply(netconfig.plan(doc, MACS), FakeRunner(), resolv_conf="/dev/null")
    said = capsys.readouterr().err
    assert "link gone" in said and "owned" in said
    assert not [c for c in said if not c.isprintable() and c != "\n"], repr(said)
    assert said.count("\n") == len(said.splitlines())     # one line per message, no more


def test_a_failed_commands_text_reaches_the_console_cleaned(capsys):
    class Failing(FakeRunner):
        def run(self, argv, **kwargs):
            from provision_agent.errors import CommandError
            raise CommandError(argv, 2, "", "RTNETLINK\x1b[31m answers\r\nfake: line")
    netconfig.apply(netconfig.plan(DOC, MACS), Failing(), resolv_conf="/dev/null")
    said = capsys.readouterr().err
    assert "RTNETLINK" in said
    assert not [c for c in said if not c.isprintable() and c != "\n"], repr(said)
    assert not [ln for ln in said.splitlines() if not ln.startswith("network_data: ")], said


def test_the_unusable_files_name_is_cleaned_too(tmp_path, capsys):
    path = tmp_path / "n\x1b[2Jd.json"
    path.write_text("{")
    assert netconfig.main(["--network_data", str(path), "--sysfs", str(tmp_path)]) == 1
    said = capsys.readouterr().err
    assert "\x1b" not in said and "is not usable" in said


def test_ipv6_static_address_and_default_route_applied(tmp_path):
    """A virtual-media boot on an IPv6-only provisioning network (issue 62)."""
    doc = _copy()
    doc["networks"] = [{"id": "p6", "type": "ipv6", "link": "port-0",
                        "ip_address": "fd00:5a::100", "netmask": "ffff:ffff:ffff:ffff::",
                        "routes": [{"network": "::", "netmask": "::",
                                    "gateway": "fd00:5a::1"}]}]
    doc["services"] = [{"type": "dns", "address": "fd00:5a::53"}]
    runner = FakeRunner()
    resolv = tmp_path / "resolv.conf"
    assert netconfig.apply(netconfig.plan(doc, MACS), runner, resolv_conf=resolv) == ["ens2"]
    assert runner.lines()[2:] == ["ip addr add fd00:5a::100/64 dev ens2",
                                  "ip -6 route replace ::/0 via fd00:5a::1 dev ens2"]
    assert resolv.read_text() == "nameserver fd00:5a::53\n"
