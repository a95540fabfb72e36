"""What the ramdisk's agent reads from the machine: the kernel command line, the Ethernet
NICs (recorded sysfs trees), the address towards the API."""

from provision_agent.agent import host


def test_kernel_params_last_wins_and_bare_words():
    params = host.kernel_params("ro ipa-api-url=http://a:6385 quiet ipa-api-url=http://b\n")
    assert params["ipa-api-url"] == "http://b"
    assert params["quiet"] == "" and params["ro"] == ""


def test_kernel_params_ignores_absurd_values():
    assert "x" not in host.kernel_params("x=" + "a" * 100000)


def _nic(root, name, mac, kind="1", device=True):
    d = root / name
    d.mkdir()
    (d / "type").write_text(kind + "\n")
    (d / "address").write_text(mac + "\n")
    if device:
        (d / "device").mkdir()


def test_mac_addresses_are_physical_ethernet_only(tmp_path):
    _nic(tmp_path, "eth0", "52:54:00:AA:BB:01")
    _nic(tmp_path, "lo", "00:00:00:00:00:00", kind="772", device=False)
    _nic(tmp_path, "br0", "52:54:00:aa:bb:09", device=False)
    _nic(tmp_path, "ib0", "80:00:00:00", kind="32")
    _nic(tmp_path, "eth1", "52:54:00:aa:bb:02")
    assert host.mac_addresses(str(tmp_path)) == ["52:54:00:aa:bb:01", "52:54:00:aa:bb:02"]


def test_callback_url_names_address_and_ssh_port():
    assert host.callback_url("192.0.2.5", 22) == "https://192.0.2.5:22"
    assert host.callback_url("2001:db8::5", 2222) == "https://[2001:db8::5]:2222"


def test_source_address_is_the_route_towards_the_api():
    assert host.source_address("http://127.0.0.1:6385") == "127.0.0.1"


def test_source_address_towards_an_ipv6_api():
    """The route to an IPv6 literal's host gives an IPv6 source address (loopback here)."""
    assert host.source_address("http://[::1]:6385/") == "::1"
    assert host.callback_url(host.source_address("https://[::1]"), 22) == "https://[::1]:22"
