"""curtin's storage test configurations, translated into the native format (issue 56).

Each of the 48 `examples/tests/*.yaml` of canonical/curtin with a `storage:` section is written
as a native document in tests/unit/curtin_corpus/NAME.json, from the YAML's facts and curtin's
doc/topics/storage.rst. manifest.json says for each what curtin intends: either the facts the
plan must show (tables, partitions with their bytes, types and flags, arrays, volume groups,
filesystems and mount points, what is kept and what is wiped, where grub goes), read here from
the dry run's JSON plan (`provision --dry_run --plan_format json` against a recorded inventory
of the disks the YAML names), or the exit code and message of a clear refusal, with its reason.
A translation that plans but not as curtin intends is a defect: `xfail` (strict) with its issue.
"""

import json
import re

import pytest

from tests.unit.helpers import REPO, run_cli

CORPUS = REPO / "tests" / "unit" / "curtin_corpus"
MANIFEST = {k: v for k, v in json.loads((CORPUS / "manifest.json").read_text()).items()
            if not k.startswith("_")}
GiB = 1 << 30

# Type codes by registry name (the GPT type GUIDs and MBR type bytes, as sgdisk and sfdisk take
# them); an extended partition may be written as CHS (0x05) or LBA (0x0f).
GPT = {"linux": {"0FC63DAF-8483-4772-8E79-3D69D8477DE4"},
       "esp": {"C12A7328-F81F-11D2-BA4B-00A0C93EC93B"},
       "bios_grub": {"21686148-6449-6E6F-744E-656564454649"},
       "prep": {"9E1A2D38-C612-4316-AA26-8B49521E5A8B"}}
MBR = {"linux": {"0x83"}, "esp": {"0xef"}, "extended": {"0x05", "0x0f"}}
FAT = {"fat32": ["-F", "32"], "fat16": ["-F", "16"]}


def curtin_bytes(size):
    """A size as curtin reads it: an integer is bytes; a number with B, K, M, G or T (a trailing
    B allowed: 1GB) in binary multiples."""
    if isinstance(size, int):
        return size
    m = re.fullmatch(r"([0-9.]+)([KMGT]?)B?", size)
    assert m, f"not a curtin size: {size}"
    return int(float(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " "))


def machine(spec):
    """The inventory of the disks a case names: 'NAME SERIAL [GiB] [wwn=W] [multipath=WWID]
    [by_path=LINK]' (an iSCSI LUN: the by-path link udev gives it, under /dev/disk/by-path/)."""
    disks = []
    for i, line in enumerate(spec):
        words = line.split()
        opts = dict(w.split("=", 1) for w in words[2:] if "=" in w)
        size = next((int(w) for w in words[2:] if w.isdigit()), 10)
        disk = {"name": f"/dev/{words[0]}", "size": size * GiB, "serial": words[1],
                "wwn": opts.get("wwn"), "model": "QEMU HARDDISK", "vendor": "QEMU",
                "rotational": True, "hctl": None,
                "by_path": f"/dev/disk/by-path/{opts.get('by_path', f'pci-0:{i}')}",
                "by_id": [], "logical_block_size": 512, "physical_block_size": 512}
        if "multipath" in opts:
            disk["name"] = f"/dev/mapper/{words[0]}"
            disk["multipath"] = {"wwid": opts["multipath"], "dm": "/dev/dm-0", "paths": [
                {"name": f"/dev/sd{c}", "by_path": f"/dev/disk/by-path/pci-{c}-scsi-0:0:0:0",
                 "hctl": f"{n}:0:0:0"} for n, c in enumerate("yz")]}
        disks.append(disk)
    return {"inventory": {"disks": disks}}


def default_machine(doc):
    """For a refusal: a disk for every disk the document names by serial (never reached when
    the schema refuses it)."""
    return [f"sd{chr(97 + i)} {d.get('match', {}).get('serial', 'none')}"
            for i, d in enumerate(doc["disks"])]


def dry_run(tmp_path, name, case):
    doc = json.loads((CORPUS / f"{name}.json").read_text())
    inv = machine(case.get("machine") or default_machine(doc))
    return run_cli(tmp_path, doc, inv, extra=["--plan_format", "json"])


def resolved(name):
    case = MANIFEST[name]
    return {**MANIFEST[case["same_as"]], **case} if "same_as" in case else case


def params():
    for name in sorted(MANIFEST):
        case = resolved(name)
        marks = [pytest.mark.xfail(strict=True, reason=case["xfail"])] if "xfail" in case else []
        yield pytest.param(name, marks=marks, id=name)


def test_every_curtin_storage_test_is_in_the_corpus():
    """The 48 configurations, each with its translation and one outcome."""
    docs = {p.stem for p in CORPUS.glob("*.json")} - {"manifest"}
    assert docs == set(MANIFEST) and len(docs) == 48
    for name in MANIFEST:
        case = resolved(name)
        assert ("plans" in case) != ("refused" in case), name


@pytest.mark.parametrize("name", sorted(n for n in MANIFEST if "refused" in resolved(n)))
def test_refused_clearly(tmp_path, name):
    refused = resolved(name)["refused"]
    rc, out, err = dry_run(tmp_path, name, resolved(name))
    assert rc == refused["exit"], err
    # every problem reported is one the manifest expects, and each expected one is reported:
    # the translation is refused for its reason and nothing else
    problems = [line[4:] for line in err.splitlines() if line.startswith("  - ")]
    assert f"invalid input ({len(problems)})" in err, err
    assert sorted(p for p in problems for part in refused["message"] if p.startswith(part)) \
        == sorted(problems), err
    for part in refused["message"]:
        assert any(p.startswith(part) for p in problems), (part, err)
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("name", [p for p in params()
                                  if "plans" in resolved(p.values[0])])
def test_plans_what_curtin_intends(tmp_path, name):
    case = resolved(name)
    rc, out, err = dry_run(tmp_path, name, case)
    assert rc == 0, err
    plan = json.loads(out)
    want = case["plans"]
    steps = plan["steps"]
    check_disks(steps, want)
    check_partitions(steps, want)
    check_arrays_and_groups(plan, want)
    check_bcache(plan, want)
    check_filesystems(plan, want)
    check_encrypted(steps, want)
    check_bootloader(steps, want)
    for volume in want.get("encrypted", {}).values():
        # curtin's dm_crypt key is a credential: nowhere in what the dry run shows
        assert volume["key"] not in out + err


def of_kind(steps, *kinds):
    return [s["args"] for s in steps if s["kind"] in kinds]


def check_disks(steps, want):
    tables = {a["disk"]: a["label"] for a in of_kind(steps, "partition_table")}
    assert tables == want["tables"]
    assert {a["disk"]: a["keep"] for a in of_kind(steps, "wipe")} == want["wipes"]
    wiped = {a["device"]: a["how"] for a in of_kind(steps, "wipe_contents")}
    assert wiped == want.get("wiped", {})
    text = json.dumps(steps)
    for disk in want.get("untouched", []):
        assert f'"{disk}' not in text, f"{disk} is named by the plan"


def check_partitions(steps, want):
    tables = {a["disk"]: a["label"] for a in of_kind(steps, "partition_table")}
    got = {a["device"]: a for a in of_kind(steps, "partition")}
    assert sorted(got) == sorted(want["partitions"])
    for dev, spec in want["partitions"].items():
        part, label = got[dev], tables[got[dev]["disk"]]
        codes = (GPT if label == "gpt" else MBR)[spec.get("type", "linux")]
        assert part["size"] == curtin_bytes(spec["size"]), dev
        assert part["type"] in codes, (dev, part["type"])
        assert sorted(part["flags"]) == sorted(spec.get("flags", [])), dev
        assert part["keep"] is spec.get("keep", False), dev
        assert part["kind"] == (spec.get("kind", "primary") if label == "msdos" else None), dev
        if "offset" in spec:
            assert part["offset"] == curtin_bytes(spec["offset"]), dev
        if "guid" in spec:
            assert part["guid"].lower() == spec["guid"], dev


def check_arrays_and_groups(plan, want):
    made = {a["device"]: dict(a, preserve=False) for a in of_kind(plan["steps"], "md_create")}
    made.update({a["device"]: dict(a, preserve=True)
                 for a in of_kind(plan["steps"], "md_assemble")})
    assert sorted(made) == sorted(want.get("raids", {}))
    for dev, spec in want.get("raids", {}).items():
        md = made[dev]
        assert (md["level"], md["members"], md["spares"], md["preserve"]) == (
            spec["raidlevel"], spec["devices"], spec.get("spare_devices", []),
            spec.get("preserve", False)), dev
    # the installed system assembles every array at boot, as curtin's mdadm.conf has it
    conf = [a for s in of_kind(plan["steps"], "mdadm_conf") for a in s["arrays"]]
    assert sorted(conf) == sorted(made)
    groups = {g["name"]: g for g in plan["layout"]["volume_groups"]}
    assert sorted(groups) == sorted(want.get("volume_groups", {}))
    lvs = {(a["vg"], a["name"]): a for a in of_kind(plan["steps"], "lv_create")}
    for name, spec in want.get("volume_groups", {}).items():
        group, kept = groups[name], spec.get("preserve", False)
        assert (group["pvs"], group["keep"]) == (spec["devices"], kept), name
        assert sorted(lv["name"] for lv in group["logical_volumes"]) == sorted(spec["lvs"])
        for lv, size in spec["lvs"].items():
            if kept:
                assert (name, lv) not in lvs
            elif size is None:             # curtin: no size is what the group has left
                assert lvs[(name, lv)]["extents"] == "100%FREE", lv
            else:
                assert lvs[(name, lv)]["size_bytes"] == curtin_bytes(size), lv


def check_bcache(plan, want):
    """Each bcache device over its backing device, cached as curtin says; each cache device made
    a cache set once (its other bcache devices attach to it); and the image checked for
    bcache-tools when the installed system mounts one at boot."""
    made = {a["device"]: a for a in of_kind(plan["steps"], "bcache_create")}
    assert sorted(made) == sorted(want.get("bcache", {}))
    for dev, spec in want.get("bcache", {}).items():
        b = made[dev]
        assert (b["backing"], b["cache"], b["cache_mode"]) == (
            spec["backing_device"], spec.get("cache_device"), spec.get("cache_mode", "none")), dev
    caches = [b["cache"] for b in made.values() if b["format_cache"]]
    assert sorted(caches) == sorted({b["cache"] for b in made.values() if b["cache"]})
    mounted = {dev for dev, fs in want["filesystems"].items() if dev in made and fs.get("path")}
    checked = {d for s in of_kind(plan["steps"], "bcache_boot") for d in s["devices"]}
    assert mounted <= checked


def check_filesystems(plan, want):
    layout = {f["device"]: f for f in plan["layout"]["filesystems"]}
    mkfs = {a["device"]: a for a in of_kind(plan["steps"], "mkfs")}
    entries = [e for a in of_kind(plan["steps"], "fstab") for e in a["entries"]]
    fstab = {e["device"]: e for e in entries if "device" in e}
    assert sorted(layout) == sorted(want["filesystems"])
    for dev, spec in want["filesystems"].items():
        fs, fstype = layout[dev], spec["fstype"]
        assert fs["type"] == ("vfat" if fstype in FAT else fstype), dev
        assert fs["mount"] == spec.get("path"), dev
        assert fs["keep"] is spec.get("preserve", False), dev
        if spec.get("preserve"):
            assert dev not in mkfs, f"{dev} is kept, yet made anew"
        else:
            assert mkfs[dev]["fs_type"] == fs["type"], dev
            assert mkfs[dev]["options"] == spec.get("mkfs_options", FAT.get(fstype, [])), dev
            assert mkfs[dev]["label"] == spec.get("label"), dev
        if spec.get("path"):
            assert fstab[dev]["mount_point"] == spec["path"], dev
            assert fstab[dev]["options"] == spec.get("options", "defaults"), dev
        elif fstype == "swap":
            assert fstab[dev]["fs_type"] == "swap", dev
        else:
            assert dev not in fstab, dev
    # curtin's mount actions without a device (tmpfs, ramfs, bind): fstab lines of their own
    mounts = {e["mount_point"]: e for e in entries if "spec" in e}
    assert sorted(mounts) == sorted(want.get("mounts", {}))
    for path, spec in want.get("mounts", {}).items():
        line = mounts[path]
        assert (line["spec"], line["fs_type"], line["options"], line["dump"]) == (
            spec["spec"], spec["fstype"], spec["options"], spec.get("freq", 0)), path


def check_encrypted(steps, want):
    """curtin's dm_crypt with a key: LUKS with that passphrase (shown redacted) and no key
    file, its crypttab entry asking for it at the console."""
    made = {a["device"]: a for a in of_kind(steps, "luks_format")}
    tab = {e["device"]: e for a in of_kind(steps, "crypttab") for e in a["entries"]}
    assert sorted(made) == sorted(want.get("encrypted", {}))
    for dev, spec in want.get("encrypted", {}).items():
        assert (made[dev]["name"], made[dev]["passphrase"]) == (spec["dm_name"], "<redacted>")
        assert (tab[dev]["key_file"], tab[dev]["unlock"]) == (None, ["passphrase"]), dev


def check_bootloader(steps, want):
    (boot,) = of_kind(steps, "bootloader")
    spec = want["bootloader"]
    assert (boot["type"], boot["boot_mode"]) == ("grub2", spec["boot_mode"])
    assert sorted(boot["targets"]) == sorted(spec["targets"])
    assert boot["esp_copies"] == spec.get("esp_copies", [])
