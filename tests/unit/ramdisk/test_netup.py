"""What the console and the READY line say each NIC got (ramdisk/netup.sh, run here with sh as
/init sources it, over a fake `ip` printing what iproute2 prints), and when the wait for
addresses is over (issue 62)."""

import subprocess

from tests.unit.helpers import REPO

RAMDISK = REPO / "ramdisk"
# `ip -4|-6 -o addr show dev NIC scope global` as iproute2 6.1 prints it
ADDRS = {
    ("-4", "ens2"): "2: ens2    inet 10.0.2.15/24 brd 10.0.2.255 scope global dynamic ens2\\"
                    "       valid_lft 86300sec preferred_lft 86300sec",
    ("-6", "ens2"): "2: ens2    inet6 fd00:6::5054:ff:fe12:3456/64 scope global dynamic "
                    "mngtmpaddr \\       valid_lft 86389sec preferred_lft 14389sec\n"
                    "2: ens2    inet6 fd00:6::1a2/128 scope global dynamic \\       "
                    "valid_lft 600sec preferred_lft 300sec",
    ("-6", "ens4"): "4: ens4    inet6 fd00:7::5/64 scope global \\       valid_lft forever "
                    "preferred_lft forever",
    # a DHCPv6 lease still in duplicate address detection: not usable as a source yet
    ("-6", "ens5"): "5: ens5    inet6 fd00:6::1b3/128 scope global tentative dynamic \\       "
                    "valid_lft 600sec preferred_lft 300sec",
}


def _fake_ip(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cases = "".join(f'  "{fam} {nic}") cat <<\'OUT\'\n{text}\nOUT\n  ;;\n'
                    for (fam, nic), text in ADDRS.items())
    # a DHCP or SLAAC address is not "permanent" (dhcpv6_start's check for a static one);
    # -tentative leaves out what is still in duplicate address detection, as iproute2 does
    (bin_dir / "ip").write_text(f'#!/bin/sh\n[ "$9" = permanent ] && exit 0\n'
                                f'out=$(case "$1 $6" in\n{cases}esac)\n'
                                'if [ "$9" = -tentative ]; then printf "%s\\n" "$out" | '
                                'grep -v " tentative "; else printf "%s\\n" "$out"; fi\n')
    (bin_dir / "ip").chmod(0o755)
    return bin_dir


def _sh(tmp_path, script):
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "ra").write_text("ens2 managed\nens3 none\n")
    env = {"PATH": f"{_fake_ip(tmp_path)}:/usr/bin:/bin", "NET_STATE": str(state)}
    return subprocess.run(["sh", "-c", "say() { echo \"say: $*\"; }; . ./netup.sh; " + script],
                          capture_output=True, text=True, check=True, cwd=RAMDISK,
                          env=env).stdout


def test_each_nic_with_its_addresses_or_none(tmp_path):
    out = _sh(tmp_path, "network_report ens2 ens3 ens4").splitlines()
    assert out == [
        "say: network: ens2: IPv4 10.0.2.15/24; IPv6 fd00:6::5054:ff:fe12:3456/64 "
        "fd00:6::1a2/128 (RA: DHCPv6 stateful)",
        "say: network: ens3: IPv4 none; IPv6 none (no router advertisement)",
        "say: network: ens4: IPv4 none; IPv6 fd00:7::5/64 (configured from network_data)",
        "ens2=10.0.2.15/24,fd00:6::5054:ff:fe12:3456/64,fd00:6::1a2/128 ens3=none "
        "ens4=fd00:7::5/64",
    ]


def test_a_managed_nic_is_done_with_its_dhcpv6_lease_not_with_slaac_alone(tmp_path):
    out = _sh(tmp_path, "v6_done ens2 managed && echo ens2; v6_done ens4 managed || "
                        "echo 'ens4 waits'; v6_done ens4 slaac && echo 'ens4 slaac'")
    assert out.splitlines() == ["ens2", "ens4 waits", "ens4 slaac"]


def test_the_url_family_is_that_of_a_literal_host_and_none_for_a_name(tmp_path):
    urls = ["http://10.251.200.1:6385", "http://[fd00:5a:c8::1]:6385/v1", "http://10.0.0.1",
            "https://ironic.example.com:6385", ""]
    out = _sh(tmp_path, "".join(f"echo \"[$(url_family '{u}')]\"; " for u in urls))
    assert out.splitlines() == ["[4]", "[6]", "[4]", "[]", "[]"]


def _network_up(tmp_path, need):
    """network_up on ens2 with fake clients: IPv4's dhclient binds at once (the fake `ip`
    shows its lease), the RAs are read 3 s later; NET_GRACE 30 s, so only NET_NEED can end
    the wait before they are. Returns (console, the DHCPv6 clients started, the READY words)."""
    bin_dir = _fake_ip(tmp_path)
    (bin_dir / "dhclient").write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/dhclient.calls\n')
    (bin_dir / "python3").write_text("#!/bin/sh\nsleep 3\necho 'ens2 managed'\n")
    for name in ("dhclient", "python3"):
        (bin_dir / name).chmod(0o755)
    state = tmp_path / "state"
    state.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "NET_STATE": str(state), "NET_GRACE": "30",
           "NET_NEED": need}
    # ens2's address lines as the fake ip prints them stand for the lease and the SLAAC one;
    # v6_done of a managed NIC waits for the /128, which ADDRS gives: without NET_NEED the wait
    # ends when the RAs are read (3 s), not before
    out = subprocess.run(
        ["sh", "-c", "say() { echo \"say: $*\"; }; . ./netup.sh; network_up ens2; "
                     "network_report ens2; i=0; until grep -q -- '^-6' $CALLS || [ $i -ge 40 ]; "
                     "do sleep 0.25; i=$((i + 1)); done"],
        capture_output=True, text=True, check=True, cwd=RAMDISK, timeout=60,
        env={**env, "CALLS": str(tmp_path / "dhclient.calls")}).stdout
    calls = (tmp_path / "dhclient.calls").read_text().splitlines()
    return out.splitlines(), [c for c in calls if c.startswith("-6")]


def test_the_wait_ends_when_the_family_ironics_url_needs_is_up(tmp_path):
    lines, v6 = _network_up(tmp_path, "4")
    waited = next(line for line in lines if "network: waited" in line)
    assert waited.endswith("IPv6 still waiting (clients keep running); IPv4 is what "
                           "Ironic's URL needs"), lines
    assert "say: network: ens2: IPv4 10.0.2.15/24; IPv6 fd00:6::5054:ff:fe12:3456/64 " \
        "fd00:6::1a2/128 (router advertisements still being read)" in lines
    # the managed RA, read after the wait ended, still gets its DHCPv6 client
    assert len(v6) == 1 and v6[0].startswith("-6 -nw ") and v6[0].endswith(" ens2"), v6


def test_without_a_family_to_need_the_wait_is_for_both(tmp_path):
    lines, v6 = _network_up(tmp_path, "")
    waited = next(line for line in lines if "network: waited" in line)
    assert waited.endswith("IPv4 DHCP done; IPv6 done (clients keep running)"), lines
    assert lines[-2].endswith("(RA: DHCPv6 stateful)"), lines
    assert len(v6) == 1, v6


def test_an_ipv6_address_in_duplicate_address_detection_is_not_there_yet(tmp_path):
    """The IPv6-only lab (2026-11-29): the wait ended on a DHCPv6 lease still tentative, and
    the agent, started at that moment, announced the link-local address the kernel routed by."""
    out = _sh(tmp_path, "v6_done ens5 managed || echo 'ens5 waits'; "
                        "echo \"[$(nic_addresses ens5 6)]\"; v6_done ens2 managed && echo ens2")
    assert out.splitlines() == ["ens5 waits", "[]", "ens2"]
