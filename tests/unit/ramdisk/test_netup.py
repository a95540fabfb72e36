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
}


def _fake_ip(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cases = "".join(f'  "{fam} {nic}") cat <<\'OUT\'\n{text}\nOUT\n  ;;\n'
                    for (fam, nic), text in ADDRS.items())
    (bin_dir / "ip").write_text(f'#!/bin/sh\ncase "$1 $6" in\n{cases}esac\n')
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
