"""iSCSI disks in the native format (issue 56): the schema, the located checks, what the plan
says of them, and the CHAP secrets never shown."""

import copy
import json

import pytest

from provision_agent.plan import iscsi
from provision_agent.plan.model import IscsiTarget
from tests.unit.helpers import run_cli

SECRET = "S3cretChapPass-7f1d"
MUTUAL = "Mutu4lSecret-9a2e"
IQN = "iqn.2026-11.example.provision:root"
LINK = f"/dev/disk/by-path/ip-10.0.2.2:3260-iscsi-{IQN}-lun-1"
CHECKSUM = "sha256:" + "5f" * 32


def layout():
    return {"version": 1, "disks": [
        {"id": "local", "match": {"name": "vda"},
         "partitions": [{"id": "bios", "size": "1MiB", "type": "bios_grub"},
                        {"id": "boot", "size": "1GiB"}]},
        {"id": "lun", "iscsi": {"portal": "10.0.2.2:3260", "target": IQN, "lun": 1,
                                "chap": {"username": "node1", "password": SECRET},
                                "chap_mutual": {"username": "tgt", "password": MUTUAL}},
         "partitions": [{"id": "root", "size": "4GiB"}, {"id": "data", "size": "remaining"}]}],
        "filesystems": [{"device": "root", "type": "ext4", "mount": "/"},
                        {"device": "boot", "type": "ext4", "mount": "/boot"},
                        {"device": "data", "type": "xfs", "mount": "/srv"}],
        "images": [{"uri": "http://h/x.tar.gz", "format": "tar", "target": "/",
                    "checksum": CHECKSUM}],
        "bootloader": {"boot_mode": "bios"}}


def disk(name, by_path, gib=10):
    return {"name": name, "size": gib << 30, "serial": name[-3:], "wwn": None, "model": "m",
            "vendor": "v", "rotational": True, "hctl": None, "by_path": by_path, "by_id": [],
            "logical_block_size": 512, "physical_block_size": 512}


def machine(link=LINK):
    return {"inventory": {"disks": [disk("/dev/vda", "/dev/disk/by-path/pci-0000:00:04.0"),
                                    disk("/dev/sda", link)]}}


def problems(err):
    return [line[4:] for line in err.splitlines() if line.startswith("  - ")]


def test_the_lun_is_found_by_its_by_path_link_and_the_plan_says_what_boot_needs(tmp_path):
    rc, out, err = run_cli(tmp_path, layout(), machine(), extra=["--plan_format", "json"])
    assert rc == 0, err
    plan = json.loads(out)
    lun = next(d for d in plan["layout"]["disks"] if d["id"] == "lun")
    assert lun["device"] == "/dev/sda" and "by_path" in lun["matched_by"]
    steps = {s["kind"]: s["args"] for s in plan["steps"]}
    entry = {"portal": "10.0.2.2:3260", "target": IQN, "lun": 1, "chap": True,
             "chap_mutual": True}
    assert steps["iscsi_conf"] == {"initiator": None, "targets": [entry], "root": entry}
    fstab = {e["mount_point"]: e["options"] for e in steps["fstab"]["entries"]}
    # / is mounted by the initramfs; /srv once the network and iscsid are up
    assert fstab == {"/": "defaults", "/boot": "defaults", "/srv": "defaults,_netdev"}
    assert steps["bootloader"]["targets"] == ["/dev/vda"]
    assert steps["bootloader"]["kernel_params"] == "ip=::::::dhcp"
    assert steps["bootloader"]["initramfs"] == "rebuild"
    kinds = [s["kind"] for s in plan["steps"]]
    assert kinds.index("iscsi_conf") < kinds.index("bootloader")   # in the rebuilt initramfs


def test_an_operators_ip_parameter_is_kept_and_a_local_root_needs_no_initramfs_login(tmp_path):
    doc = layout()
    doc["bootloader"]["kernel_params"] = "ip=eth0:dhcp"
    rc, out, err = run_cli(tmp_path, doc, machine(), extra=["--plan_format", "json"])
    assert rc == 0, err
    steps = {s["kind"]: s["args"] for s in json.loads(out)["steps"]}
    assert steps["bootloader"]["kernel_params"] == "ip=eth0:dhcp"
    doc["filesystems"][0]["device"], doc["filesystems"][1]["mount"] = "boot", "/mnt/x"
    doc["filesystems"][1]["device"] = "root"
    rc, out, err = run_cli(tmp_path, doc, machine(), extra=["--plan_format", "json"])
    assert rc == 0, err
    steps = {s["kind"]: s["args"] for s in json.loads(out)["steps"]}
    assert steps["iscsi_conf"]["root"] is None
    assert "ip=::::::dhcp" not in steps["bootloader"]["kernel_params"]


def test_the_chap_secrets_are_never_shown(tmp_path):
    """Plan text, JSON plan, the debug log, and an error report of the same document."""
    shown = []
    for extra in (["--debug"], ["--plan_format", "json", "--debug"]):
        rc, out, err = run_cli(tmp_path, layout(), machine(), extra=extra)
        assert rc == 0, err
        shown.append(out + err)
    bad = layout()
    bad["disks"][1]["iscsi"]["target"] = "IQN.bad"
    rc, out, err = run_cli(tmp_path, bad, machine(), extra=["--debug"])
    assert rc == 2
    shown.append(out + err)
    log = tmp_path / "log.txt"
    rc, out, err = run_cli(tmp_path, layout(), machine(), extra=["--log_file", str(log)])
    shown.append(out + err + log.read_text())
    for text in shown:
        assert SECRET not in text and MUTUAL not in text
    lun = next(d for d in json.loads(shown[1][:shown[1].rindex("}") + 1])["layout"]["disks"]
               if d["id"] == "lun")
    assert lun["iscsi"] == {"portal": "10.0.2.2:3260", "target": IQN, "lun": 1, "chap": True,
                            "chap_mutual": True}
    assert SECRET not in repr(iscsi.from_document(layout()["disks"][1]["iscsi"]))


@pytest.mark.parametrize("change, where, part", [
    (lambda d: d["iscsi"].update(target="iqn.2026-13.example:x"), "$.disks[1].iscsi.target",
     "is not an iSCSI name"),
    (lambda d: d["iscsi"].update(target="Iqn.2026-11.example:x"), "$.disks[1].iscsi.target",
     "has capitals"),
    (lambda d: d["iscsi"].update(portal="storage.example:3260"), "$.disks[1].iscsi.portal",
     "a host name cannot be matched"),
    (lambda d: d["iscsi"].update(portal="10.0.2.2:0"), "$.disks[1].iscsi.portal",
     "port 0 is not 1 to 65535"),
    (lambda d: d["iscsi"].update(portal="10.0.2.2:65536"), "$.disks[1].iscsi.portal",
     "port 65536"),
    (lambda d: d["iscsi"].update(portal="[10.0.2.2]:3260"), "$.disks[1].iscsi.portal",
     "brackets are for IPv6"),
    (lambda d: d["iscsi"].update(portal="fd00::1:3260"), "$.disks[1].iscsi.portal",
     "bracketed IPv6"),
    (lambda d: d["iscsi"].update(portal="300.0.0.1"), "$.disks[1].iscsi.portal",
     "is not an IP address"),
    (lambda d: d["iscsi"].update(initiator="initiator"), "$.disks[1].iscsi.initiator",
     "is not an iSCSI name"),
    (lambda d: d["iscsi"].pop("chap"), "$.disks[1].iscsi.chap_mutual", "needs chap too"),
    (lambda d: d.update(match={"name": "sda"}), "$.disks[1].match", "not both"),
])
def test_located_problems(tmp_path, change, where, part):
    doc = layout()
    change(doc["disks"][1])
    rc, out, err = run_cli(tmp_path, doc, machine())
    assert rc == 2, err
    assert [p for p in problems(err) if p.startswith(f"{where}: ") and part in p], err
    assert SECRET not in err


@pytest.mark.parametrize("change, part", [
    (lambda d: d["iscsi"].update(lun=16384), "$.disks[1].iscsi.lun: must be at most 16383"),
    (lambda d: d["iscsi"].update(lun=-1), "$.disks[1].iscsi.lun: must be at least 0"),
    (lambda d: d["iscsi"]["chap"].pop("password"), "'password' is a required property"),
    (lambda d: d["iscsi"].pop("target"), "'target' is a required property"),
])
def test_schema_problems(tmp_path, change, part):
    doc = layout()
    change(doc["disks"][1])
    rc, out, err = run_cli(tmp_path, doc, machine())
    assert rc == 2 and part in err, err
    assert "$.disks[1].iscsi" in err and SECRET not in err


def test_ipv6_portals_match_either_spelling_of_the_address(tmp_path):
    t = IscsiTarget(portal="[fd00::1]:3261", target=IQN, lun=0)
    short = f"/dev/disk/by-path/ip-fd00::1:3261-iscsi-{IQN}-lun-0"
    full = f"/dev/disk/by-path/ip-fd00:0000:0000:0000:0000:0000:0000:0001:3261-iscsi-{IQN}-lun-0"
    assert iscsi.by_path_links(t) == [short, full]
    assert iscsi.parse_portal("[fd00::1]") == ("fd00::1", 3260)
    assert iscsi.portal_text("fd00::1", 3260) == "[fd00::1]:3260"
    doc = layout()
    doc["disks"][1]["iscsi"].update(portal="[fd00::1]:3261", lun=0)
    for link in (short, full):
        rc, out, err = run_cli(tmp_path, doc, machine(link), extra=["--plan_format", "json"])
        assert rc == 0, err
        lun = next(d for d in json.loads(out)["layout"]["disks"] if d["id"] == "lun")
        assert lun["device"] == "/dev/sda"


def test_machine_wide_rules(tmp_path):
    doc = layout()
    second = copy.deepcopy(doc["disks"][1])
    second.update(id="lun2", partitions=[])
    second["iscsi"]["initiator"] = "iqn.2026-11.example:node-a"
    doc["disks"][1]["iscsi"]["initiator"] = "iqn.2026-11.example:node-b"
    doc["disks"].append(second)
    doc["bootloader"]["targets"] = ["lun"]
    rc, out, err = run_cli(tmp_path, doc, machine())
    assert rc == 2
    got = problems(err)
    assert any(p.startswith("$.disks: a machine has one initiator name") for p in got), err
    assert any(p.startswith("$.disks[2].iscsi: the same LUN as disk 'lun'") for p in got), err
    assert any(p.startswith("$.bootloader: disk 'lun' is an iSCSI disk") for p in got), err


def test_root_over_luns_of_two_targets_is_refused(tmp_path):
    doc = layout()
    other = copy.deepcopy(doc["disks"][1])
    other.update(id="lun2", partitions=[{"id": "root2", "size": "remaining"}])
    other["iscsi"]["target"] = "iqn.2026-11.example.provision:other"
    doc["disks"].append(other)
    doc["raids"] = [{"id": "md0", "name": "root", "level": 1, "members": ["root", "root2"]}]
    doc["filesystems"][0]["device"] = "md0"
    rc, out, err = run_cli(tmp_path, doc, machine())
    assert rc == 2
    assert any(p.startswith("$.filesystems[0]: / stands on LUNs of several iSCSI targets")
               for p in problems(err)), err
