"""The encryption layer: schema, validation (each refusal located), the planner's order and
what a plan shows of keys (nothing)."""

import json

import pytest

from provision_agent.data_drivers.native import NativeDriver
from provision_agent.errors import InputError
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline, render
from provision_agent.plan.resolve import LUKS2_HEADER
from tests.unit.helpers import inventory, mutate, sample

DISKS = inv_mod.from_document(inventory("three-disks"))
AGE = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
THP = "x1AIFDuUJP6Nkk8-m3NvC8EZwE4"
KEY_URL = "https://keys.example/data.key?X-Amz-Signature=s3cr3tsig&X-Amz-Credential=AKIDX"


def encrypted_raid_lvm(**unlock):
    """two-disk-raid-lvm with the RAID1 under LVM encrypted (unlocked by TPM2 by default)."""
    def change(d):
        d["encrypted"] = [{"id": "crypt-os", "device": "md-os", "name": "cryptos",
                           "unlock": unlock or {"tpm2": {}}}]
        d["volume_groups"][0]["pvs"] = ["crypt-os"]
        d["recovery"] = {"age_recipients": [AGE]}
        d["images"] = [{"uri": "http://images.example/root.tar", "format": "tar",
                        "target": "/", "allow_no_checksum": True}]
        d["bootloader"] = {"boot_mode": "bios"}
    return mutate(sample("two-disk-raid-lvm"), change)


def build(doc):
    return pipeline.build_plan(NativeDriver(doc).layout(), DISKS)


def problems_of(doc):
    with pytest.raises(InputError) as exc:
        build(doc)
    return [str(p) for p in exc.value.problems]


def test_luks_sits_between_the_array_and_lvm_and_is_opened_before_the_pv():
    planned = build(encrypted_raid_lvm())
    kinds = [s.kind for s in planned.steps]
    assert kinds.index("md_create") < kinds.index("luks_format") < kinds.index("luks_open") \
        < kinds.index("pv_create")
    fmt = next(s for s in planned.steps if s.kind == "luks_format")
    assert fmt.args["device"] == "/dev/md/os" and fmt.args["name"] == "cryptos"
    assert fmt.args["cipher"] == "aes-xts-plain64" and fmt.args["key_size"] == 512
    assert fmt.args["clevis"] == {"t": 1, "pins": {"tpm2": {"pcr_bank": "sha256",
                                                            "pcr_ids": "7"}}}
    assert fmt.args["recovery_recipients"] == [AGE]
    assert "key_file" not in fmt.args                 # optional, and absent
    pv = next(s for s in planned.steps if s.kind == "pv_create")
    assert pv.args["device"] == "/dev/mapper/cryptos"
    res = planned.resolved
    assert res.sizes["crypt-os"] == res.sizes["md-os"] - LUKS2_HEADER
    tab = next(s for s in planned.steps if s.kind == "crypttab")
    assert kinds.index("fstab") < kinds.index("crypttab") < kinds.index("bootloader")
    assert tab.args["entries"] == [{"name": "cryptos", "device": "/dev/md/os",
                                    "key_file": None, "options": "luks,initramfs",
                                    "unlock": ["tpm2"], "root": True}]


def test_tang_and_tpm2_with_a_threshold_become_one_clevis_sss_config():
    doc = encrypted_raid_lvm(tpm2={"pcrs": [0, 7], "bank": "sha1"},
                             tang=[{"url": "http://tang1:7500", "thumbprint": THP},
                                   {"url": "http://tang2:7500", "thumbprint": THP}],
                             threshold=2)
    fmt = next(s for s in build(doc).steps if s.kind == "luks_format")
    assert fmt.args["clevis"] == {"t": 2, "pins": {
        "tpm2": {"pcr_bank": "sha1", "pcr_ids": "0,7"},
        "tang": [{"url": "http://tang1:7500", "thp": THP},
                 {"url": "http://tang2:7500", "thp": THP}]}}
    assert "2 of TPM2 (PCRs 0,7), Tang http://tang1:7500, Tang http://tang2:7500" \
        in fmt.description


def test_a_root_that_tang_unlocks_gets_the_network_in_its_initramfs_unless_ip_is_given():
    tang = {"tang": [{"url": "http://tang1:7500", "thumbprint": THP}]}

    def params(doc):
        return next(s for s in build(doc).steps if s.kind == "bootloader")

    step = params(mutate(encrypted_raid_lvm(**tang),
                         lambda d: d["bootloader"].__setitem__("kernel_params", "console=ttyS0")))
    assert step.args["kernel_params"] == "console=ttyS0 ip=::::::dhcp"
    assert "ip=::::::dhcp added" in step.description
    static = "ip=192.0.2.10::192.0.2.1:255.255.255.0::eth0:none"
    step = params(mutate(encrypted_raid_lvm(**tang),
                         lambda d: d["bootloader"].__setitem__("kernel_params", static)))
    assert step.args["kernel_params"] == static
    assert params(encrypted_raid_lvm()).args.get("kernel_params", "") == ""    # TPM2 only


def test_a_data_volume_on_a_logical_volume_with_a_key_file_never_shows_the_url():
    def change(d):
        d["encrypted"].append({"id": "crypt-data", "device": "lv-data", "discard": True,
                               "unlock": {"key_file": {"uri": KEY_URL,
                                                       "checksum": "sha256:" + "ab" * 32}}})
        d["filesystems"][3]["device"] = "crypt-data"
    planned = build(mutate(encrypted_raid_lvm(), change))
    kinds = [s.kind for s in planned.steps]
    data = [i for i, s in enumerate(planned.steps) if s.args.get("name") == "crypt-data"]
    lvs = [i for i, k in enumerate(kinds) if k == "lv_create"]
    assert data and min(data) > max(lvs)              # after the LV it stands on
    mkfs = [s for s in planned.steps if s.kind == "mkfs"]
    assert "/dev/mapper/crypt-data" in [s.args["device"] for s in mkfs]
    tab = next(s for s in planned.steps if s.kind == "crypttab").args["entries"]
    assert tab[1] == {"name": "crypt-data", "device": "/dev/os/data",
                      "key_file": "/etc/cryptsetup-keys.d/crypt-data.key",
                      "options": "luks,discard", "unlock": ["key_file"], "root": False}
    shown = render.plan_text(planned) + render.plan_json(planned)
    assert "s3cr3tsig" not in shown and "AKIDX" not in shown
    assert "keys.example" in shown                    # the host says which key server


@pytest.mark.parametrize("change, location, message", [
    (lambda d: d["encrypted"].append({"id": "c-boot", "device": "md-boot",
                                      "unlock": {"tpm2": {}}})
     or d["filesystems"][0].__setitem__("device", "c-boot"),
     "$.filesystems[0]", "/boot is on encrypted volume 'c-boot'"),
    (lambda d: d["filesystems"].pop(0),
     "$.filesystems", "/ is encrypted and there is no /boot"),
    (lambda d: d["encrypted"][0].__setitem__("unlock", {"key_file": {
        "uri": "/keys/os.key", "checksum": "sha256:" + "00" * 32}}),
     "$.encrypted[0]", "the root filesystem's volume cannot be opened by a key file"),
    (lambda d: d["encrypted"][0]["unlock"].update(threshold=2),
     "$.encrypted[0]", "threshold 2 but only 1 method(s)"),
    (lambda d: d["encrypted"][0]["unlock"].update(key_file={
        "uri": "/k", "checksum": "sha256:" + "00" * 32}),
     "$.encrypted[0]", "a key file opens the volume on its own"),
    (lambda d: (d["encrypted"].append({"id": "c-os0", "device": "os0",
                                       "unlock": {"tpm2": {}}}),
                d["raids"][1]["members"].__setitem__(0, "c-os0")),
     "$.raids[1]", "member 'c-os0' is an encrypted volume: encrypt the array instead"),
    (lambda d: d["encrypted"].append({"id": "c-twice", "device": "crypt-os",
                                      "unlock": {"tpm2": {}}}),
     "$.encrypted[1]", "device 'crypt-os' is encrypted already"),
    (lambda d: (d["volume_groups"][0]["pvs"].append("extra"),
                d["disks"].append({"id": "disk2", "match": {"name": "/dev/vdc"},
                                   "partitions": [{"id": "extra", "size": "1GiB",
                                                   "type": "lvm"}]})),
     "$.volume_groups[0]", "physical volumes 'extra' are not encrypted and the others are"),
    (lambda d: d.pop("recovery"), "$.recovery", "need recovery.age_recipients"),
    (lambda d: d["encrypted"].append({"id": "c2", "device": "md-boot", "name": "cryptos",
                                      "unlock": {"tpm2": {}}}),
     "$.encrypted[1]", "duplicate mapper name 'cryptos'"),
    (lambda d: d["encrypted"].append({"id": "c-bios", "device": "bios0",
                                      "unlock": {"tpm2": {}}}),
     "$.encrypted[1]", "is a bios_grub partition, which firmware reads in the clear"),
])
def test_what_cannot_boot_or_unlock_is_refused_where_it_is_written(change, location, message):
    problems = problems_of(mutate(encrypted_raid_lvm(), change))
    assert any(p.startswith(location) and message in p for p in problems), problems


@pytest.mark.parametrize("unlock, location", [
    ({}, "$.encrypted[0].unlock"),
    ({"tang": [{"url": "http://tang:7500"}]}, "$.encrypted[0].unlock.tang[0]"),
    ({"tang": [{"url": "ftp://tang", "thumbprint": THP}]},
     "$.encrypted[0].unlock.tang[0].url"),
    ({"tpm2": {"pcrs": [24]}}, "$.encrypted[0].unlock.tpm2.pcrs[0]"),
])
def test_an_unlock_the_schema_refuses(unlock, location):
    doc = mutate(encrypted_raid_lvm(), lambda d: d["encrypted"][0].__setitem__("unlock",
                                                                                unlock))
    with pytest.raises(InputError) as exc:
        NativeDriver(doc).layout()
    assert location in {p.location for p in exc.value.problems}, exc.value.problems


def test_a_key_file_url_in_a_schema_error_is_not_echoed():
    doc = mutate(encrypted_raid_lvm(), lambda d: d["encrypted"][0].__setitem__("unlock", {
        "key_file": {"uri": "gopher://x/?sig=s3cr3tsig", "checksum": "sha256:00"}}))
    with pytest.raises(InputError) as exc:
        NativeDriver(doc).layout()
    assert "s3cr3tsig" not in json.dumps([str(p) for p in exc.value.problems])


def test_a_real_run_without_a_recovery_key_file_refuses_before_its_first_command():
    from provision_agent.run import apply

    class NoCommands:
        def __call__(self, *args, **kwargs):
            raise AssertionError(f"a command ran: {args}")
        run = __call__

    class Events:
        results = []

        def result(self, *args):
            self.results.append(args)

        def close(self):
            pass
    from types import SimpleNamespace
    events = Events()
    with pytest.raises(InputError, match="need --recovery_key_file"):
        apply.provision(build(encrypted_raid_lvm()), conf=SimpleNamespace(),
                        runner=NoCommands(), live_disks=[], events=events)
    assert [r[:2] for r in events.results] == [("failed", 2)]


# Issue 52 item 15: a key file is copied to /etc/cryptsetup-keys.d on the installed root; on a
# root that is not encrypted it sits in clear next to what it opens.
KEY = {"uri": KEY_URL, "checksum": "sha256:" + "ab" * 32}


def data_volume_with_a_key_file(root_encrypted, **key):
    """two-disk-raid-lvm with /srv/data's LV encrypted by a key file, / encrypted (by TPM2,
    the array under LVM) or plain."""
    def change(d):
        d.setdefault("encrypted", []).append({"id": "crypt-data", "device": "lv-data",
                                              "unlock": {"key_file": {**KEY, **key}}})
        d["filesystems"][3]["device"] = "crypt-data"
        d["recovery"] = {"age_recipients": [AGE]}
        d["images"] = [{"uri": "http://images.example/root.tar", "format": "tar",
                        "target": "/", "allow_no_checksum": True}]
        d["bootloader"] = {"boot_mode": "bios"}
    base = encrypted_raid_lvm() if root_encrypted else sample("two-disk-raid-lvm")
    return mutate(base, change)


def test_a_key_file_on_a_plain_root_is_refused_saying_how_to_opt_in():
    doc = data_volume_with_a_key_file(root_encrypted=False)
    problems = problems_of(doc)
    where = len(doc["encrypted"]) - 1
    found = [p for p in problems if p.startswith(f"$.encrypted[{where}]")]
    assert len(found) == 1, problems
    assert "stored in clear at /etc/cryptsetup-keys.d/crypt-data.key" in found[0]
    assert "/ is not encrypted" in found[0]
    assert "unlock.key_file.allow_plain_root: true" in found[0]
    assert "s3cr3tsig" not in found[0]


def test_a_key_file_beside_a_whole_disk_image_is_refused_too():
    # / is the image's own: nothing in the layout encrypts it
    doc = {"version": 1,
           "disks": [{"id": "disk0", "match": {"name": "/dev/vda"}},
                     {"id": "disk1", "match": {"name": "/dev/vdb"},
                      "partitions": [{"id": "data", "size": "remaining", "type": "linux"}]}],
           "encrypted": [{"id": "crypt-data", "device": "data", "unlock": {"key_file": KEY}}],
           "filesystems": [{"device": "crypt-data", "type": "xfs", "mount": "/srv/data"}],
           "images": [{"uri": "http://images.example/disk.img", "format": "disk",
                       "target": "disk0", "allow_no_checksum": True}],
           "recovery": {"age_recipients": [AGE]}}
    problems = problems_of(doc)
    assert [p for p in problems if p.startswith("$.encrypted[0]")
            and "/ is not encrypted" in p], problems
    doc["encrypted"][0]["unlock"]["key_file"]["allow_plain_root"] = True
    build(doc)


def test_a_key_file_on_a_plain_root_is_accepted_when_asked_for_and_the_plan_says_so():
    planned = build(data_volume_with_a_key_file(root_encrypted=False, allow_plain_root=True))
    fmt = next(s for s in planned.steps if s.kind == "luks_format")
    assert "kept in clear on an unencrypted /" in fmt.description
    assert "kept in clear on an unencrypted /" in render.plan_text(planned)
    assert any("crypt-data" in w and "in clear" in w
               for w in render.warnings(planned.resolved)), render.warnings(planned.resolved)


def test_a_key_file_on_an_encrypted_root_needs_no_opt_in():
    planned = build(data_volume_with_a_key_file(root_encrypted=True))
    fmt = [s for s in planned.steps if s.kind == "luks_format"][-1]
    assert "in clear" not in fmt.description
    assert not render.warnings(planned.resolved)
