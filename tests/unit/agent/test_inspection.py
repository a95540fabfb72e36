"""What the ramdisk posts to Ironic's in-band inspection (provision_agent/agent/inspection.py),
on recorded machine files and a scripted API."""

import os

from provision_agent.agent import inspection
from tests.unit.fake_http import Resp, Session


def _nic(root, name, mac, kind="1", device=True, carrier="1"):
    d = root / name
    d.mkdir()
    (d / "type").write_text(kind + "\n")
    (d / "address").write_text(mac + "\n")
    (d / "carrier").write_text(carrier + "\n")
    if device:
        (d / "device").mkdir()
        (d / "device" / "vendor").write_text("0x1af4\n")
        (d / "device" / "device").write_text("0x1000\n")


def test_interfaces_are_the_physical_nics_with_their_addresses(tmp_path):
    _nic(tmp_path, "eth0", "52:54:00:AA:BB:01")
    _nic(tmp_path, "lo", "00:00:00:00:00:00", kind="772", device=False)
    _nic(tmp_path, "br0", "52:54:00:aa:bb:09", device=False)
    _nic(tmp_path, "eth1", "52:54:00:aa:bb:02", carrier="0")
    found = inspection.interfaces(str(tmp_path), {"eth0": ("192.0.2.5", "2001:db8::5")})
    assert [(i["name"], i["mac_address"], i["ipv4_address"], i["has_carrier"])
            for i in found] == [("eth0", "52:54:00:aa:bb:01", "192.0.2.5", True),
                                ("eth1", "52:54:00:aa:bb:02", None, False)]
    assert found[0]["vendor"] == "0x1af4" and found[0]["ipv6_address"] == "2001:db8::5"


def test_cpu_and_memory_as_ironics_hooks_read_them(tmp_path):
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: QEMU Virtual CPU\n"
                                      "flags\t\t: fpu vme sse2 lm\n")
    (tmp_path / "meminfo").write_text("MemTotal:        2030860 kB\nMemFree: 1 kB\n")
    cpu = inspection.cpu(str(tmp_path / "cpuinfo"))
    assert cpu["model_name"] == "QEMU Virtual CPU" and "lm" in cpu["flags"]
    assert cpu["architecture"] and cpu["count"] >= 1
    mem = inspection.memory(str(tmp_path / "meminfo"))
    assert mem == {"total": 2030860 * 1024, "physical_mb": 2048}


def test_this_machines_inventory_has_every_part_ironic_reads():
    disks = [{"name": "/dev/vda", "size": 4 << 30}]
    inv = inspection.collect(disks)
    assert inv["disks"] == disks
    assert {"interfaces", "cpu", "memory", "boot", "system_vendor"} <= set(inv)
    assert inv["boot"]["current_boot_mode"] == (
        "uefi" if os.path.isdir("/sys/firmware/efi") else "bios")




def test_the_inventory_is_posted_until_ironic_takes_it():
    session = Session([Resp(404, {"error_message": "not inspecting yet"}),
                       Resp(200, {"node": {"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"}})])
    slept = []
    taken = inspection.post_inventory(session, "http://192.0.2.1:6385/v1/continue_inspection",
                                     {"disks": []}, sleep=slept.append)
    assert taken.uuid == "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
    assert taken.token is None
    method, url, kw = session.sent[-1]
    assert (method, kw["json"]) == ("POST", {"inventory": {"disks": []}})
    assert kw["headers"]["X-OpenStack-Ironic-API-Version"] == "1.84"
    assert len(slept) == 1


def test_the_agent_token_ironic_answers_the_inventory_with_is_kept():
    """Ironic (API 1.84) answers the inventory as a lookup does and hands the node's agent
    token out there, once: with fast track the ramdisk heartbeats with it afterwards."""
    node = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
    session = Session([Resp(202, {"node": {"uuid": node},
                                  "config": {"agent_token": "t0ken"}})])
    taken = inspection.post_inventory(session, "http://h/v1/continue_inspection", {})
    assert (taken.uuid, taken.token) == (node, "t0ken")
    assert "t0ken" not in repr(taken)
    # the placeholder Ironic answers once the token went elsewhere is no token
    session = Session([Resp(202, {"node": {"uuid": node}, "config": {"agent_token": "******"}})])
    assert inspection.post_inventory(session, "http://h/v1/continue_inspection", {}).token \
        is None


def test_a_refusal_is_not_retried():
    session = Session([Resp(400, {"error_message": "No lookup information provided"})])
    assert inspection.post_inventory(session, "http://h/v1/continue_inspection", {},
                                    sleep=lambda s: None) is None
    assert len(session.sent) == 1


def test_the_boot_nic_from_bootif_as_ironics_pxe_configs_pass_it():
    """Ironic's inspection keeps PXE on for the port named by boot.pxe_interface only."""
    assert inspection.boot_info("52:54:00:AA:BB:01")["pxe_interface"] == "52:54:00:aa:bb:01"
    assert inspection.boot_info("01-52-54-00-aa-bb-01")["pxe_interface"] == \
        "01-52-54-00-aa-bb-01"
    for junk in (None, "", "${mac}", "52:54:00:aa:bb", "52:54:00:aa:bb:01 x", "0" * 5000):
        assert "pxe_interface" not in inspection.boot_info(junk), junk
    assert inspection.collect([], bootif="52:54:00:aa:bb:01")["boot"]["pxe_interface"] == \
        "52:54:00:aa:bb:01"
