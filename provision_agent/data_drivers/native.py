"""The native format: a JSON document checked against schema/native-v1.json."""

import difflib
import functools
import json
from importlib import resources

import jsonschema

from provision_agent.data_drivers import shape
from provision_agent.data_drivers.base import DataDriver
from provision_agent.errors import InputError, Problem
from provision_agent.plan import iscsi, keep_on_rebuild, model
from provision_agent.plan.units import parse_size


@functools.cache
def schema():
    text = resources.files("provision_agent").joinpath("schema/native-v1.json").read_text()
    return json.loads(text)


def json_path(parts):
    path = "$"
    for p in parts:
        path += f"[{p}]" if isinstance(p, int) else f".{p}"
    return path


def schema_problems(document):
    """Every schema violation, each with the JSON path of the offending value."""
    validator = jsonschema.Draft202012Validator(schema())
    problems = []
    for err in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.path))):
        problems.append(Problem(json_path(err.absolute_path), _message(err)))
    return problems


# Values are echoed only when short: a long one says nothing more and may be a secret.
_ECHO_MAX = 32


def _message(err):
    """What is wrong, in terms of what would be right (the schema's x-expected text)."""
    # A bound is the one thing to say about an over-long value (and its value is not shown).
    for e in [err, *(err.context or ())]:
        if e.validator == "maxLength":
            return f"longer than {e.validator_value} characters"
        if e.validator == "maxItems":
            return f"more than {e.validator_value} items"
    expected = err.schema.get("x-expected") if isinstance(err.schema, dict) else None
    if expected and err.validator in ("pattern", "oneOf", "anyOf", "type", "minimum"):
        value = err.instance
        # x-secret: a credential, however short, is never echoed
        shown = repr(value) if isinstance(value, (str, int, float)) and \
            len(repr(value)) <= _ECHO_MAX and not err.schema.get("x-secret") else "this value"
        return f"{shown} is not valid here: expected {expected}"
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        return _unknown_fields(err)
    # For oneOf/anyOf the best sub-error says more than "is not valid under any".
    best = jsonschema.exceptions.best_match([err]) if err.context else err
    return _plain(best)


def _plain(err):
    """jsonschema's message without the offending value (it may be a password)."""
    v, want = err.validator, err.validator_value
    if v == "type":
        wanted = [want] if isinstance(want, str) else want
        names = " or ".join(shape.NAMES.get(w, w) for w in wanted)
        return f"must be {names}, not {shape.kind(err.instance)}"
    if v == "enum":
        return f"must be one of: {', '.join(json.dumps(x) for x in want)}"
    if v == "const":
        return f"must be {json.dumps(want)}"
    if v in ("minimum", "exclusiveMinimum"):
        return f"must be at least {want}" if v == "minimum" else f"must be more than {want}"
    if v in ("maximum", "exclusiveMaximum"):
        return f"must be at most {want}" if v == "maximum" else f"must be less than {want}"
    if v == "minItems":
        return f"needs at least {want} item{'s' if want != 1 else ''}"
    if v == "uniqueItems":
        return "lists the same item twice"
    if v == "minProperties":
        return f"needs at least {want} entr{'ies' if want != 1 else 'y'}"
    if v == "required":
        return err.message          # names the missing property, not a value
    if v == "pattern":
        return "does not have the expected form"
    return f"is not valid here ({v})"


def _unknown_fields(err):
    known = sorted((err.schema.get("properties") or {}))
    parts = []
    for name in sorted(set(err.instance) - set(known)):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        parts.append(f"{name[:_ECHO_MAX]!r}{hint}")
    return (f"unknown field{'s' if len(parts) > 1 else ''} {', '.join(parts)}; "
            f"known here: {', '.join(known)}")


class NativeDriver(DataDriver):
    def layout(self):
        problems = schema_problems(self.data)
        if not problems:
            keep_on_rebuild.refuse_outside_ironic(
                self.data, lambda where, msg: problems.append(Problem(where, msg)))
        if problems:
            raise InputError(problems)
        return build_layout(self.data)


def _size(value, where, problems, default_unit="MiB"):
    try:
        return parse_size(value, default_unit)
    except ValueError as exc:
        problems.append(Problem(where, str(exc)))
        return parse_size(1)


def build_layout(doc):
    """Model objects from a schema-valid native document."""
    problems = []
    layout = model.Layout(
        disks=[_disk(d, f"$.disks[{i}]", problems) for i, d in enumerate(doc["disks"])],
        raids=[_raid(r, f"$.raids[{i}]", problems) for i, r in enumerate(doc.get("raids", []))],
        bcache=[_bcache(b, f"$.bcache[{i}]", problems)
                for i, b in enumerate(doc.get("bcache", []))],
        volume_groups=[_vg(v, f"$.volume_groups[{i}]", problems)
                       for i, v in enumerate(doc.get("volume_groups", []))],
        encrypted=[_encrypted(e, f"$.encrypted[{i}]", problems)
                   for i, e in enumerate(doc.get("encrypted", []))],
        recovery_recipients=list((doc.get("recovery") or {}).get("age_recipients", [])),
        filesystems=[_filesystem(f, f"$.filesystems[{i}]")
                     for i, f in enumerate(doc.get("filesystems", []))],
        mounts=[model.Mount(type=m["type"], mount=m["mount"], source=m.get("source"),
                            mount_options=m.get("mount_options"),
                            fstab_freq=m.get("fstab_freq", 0), fstab_pass=m.get("fstab_pass", 0),
                            origin=m.get("origin", f"$.mounts[{i}]"))
                for i, m in enumerate(doc.get("mounts", []))],
        images=[_image(im, f"$.images[{i}]") for i, im in enumerate(doc.get("images", []))],
        extensions=dict(doc.get("extensions") or {}))
    if "bootloader" in doc:
        b = doc["bootloader"]
        layout.bootloader = model.Bootloader(
            type=b.get("type", "grub2"), boot_mode=b.get("boot_mode", "auto"),
            targets=b.get("targets"), kernel_params=b.get("kernel_params", ""),
            secure_boot=b.get("secure_boot", False), initramfs=b.get("initramfs", "auto"),
            origin=b.get("origin", "$.bootloader"))
    if "configdrive" in doc:
        c = doc["configdrive"]
        layout.configdrive = model.Configdrive(
            format=c.get("format", "config-2"), content=c.get("content"),
            meta_data=c.get("meta_data"), user_data=c.get("user_data"),
            network_data=c.get("network_data"), partition=c.get("partition"),
            disk=c.get("disk"), origin=c.get("origin", "$.configdrive"))
    for i, _pool in enumerate(doc.get("zfs_pools", [])):
        problems.append(Problem(f"$.zfs_pools[{i}]", model.ZFS_REFUSED))
    if problems:
        raise InputError(problems)
    return layout


def _disk(d, where, problems):
    disk = model.Disk(id=d["id"], hints=dict(d.get("match") or {}), table=d.get("table", "gpt"),
                      table_named="table" in d,
                      fallback_hints=[dict(h) for h in d.get("fallback_match", [])],
                      wipe=d.get("wipe", True), origin=d.get("origin", where),
                      from_inventory=d.get("from_inventory", False), pick=d.get("pick"),
                      exclude=[dict(h) for h in d.get("exclude", [])])
    disk.partitions = _partitions(d, where, problems)
    if "iscsi" in d:
        if "match" in d or "fallback_match" in d:
            problems.append(Problem(f"{where}.match", "an iSCSI disk is found by its portal, "
                                    "target and LUN: give iscsi or match, not both"))
        spec = d["iscsi"]
        if isinstance(spec, str):        # curtin's URI; its credentials never in a message
            try:
                spec = iscsi.parse_uri(spec)
            except ValueError as exc:
                problems.append(Problem(f"{where}.iscsi", str(exc)))
                spec = {"portal": "-", "target": "-"}
        disk.iscsi = iscsi.from_document(spec)
        try:
            disk.hints = iscsi.hints(disk.iscsi)
        except ValueError:
            disk.hints = {"by_path": "-"}     # validation names the portal's problem
    return disk


def _partitions(holder, where, problems):
    """The partitions of a disk or an array."""
    out = []
    for j, p in enumerate(holder.get("partitions", [])):
        pwhere = f"{where}.partitions[{j}]"
        out.append(model.Partition(
            id=p["id"], size=_size(p["size"], pwhere + ".size", problems),
            type=p.get("type", "linux"), type_guid=p.get("type_guid"), name=p.get("name"),
            guid=p.get("guid"), flags=list(p.get("flags", [])),
            keep=p.get("keep", False) is True, keep_if_present=p.get("keep") == "if_present",
            origin=p.get("origin", pwhere), number=p.get("number"), wipe=p.get("wipe"),
            offset=_size(p["offset"], pwhere + ".offset", problems) if "offset" in p else None))
    return out


def _raid(r, where, problems):
    chunk = r.get("chunk")
    chunk_kib = None
    if chunk is not None:
        chunk_kib = _size(chunk, where + ".chunk", problems, "KiB").bytes // 1024
    return model.Raid(id=r["id"], name=r.get("name", r["id"]), level=r["level"],
                      members=list(r["members"]), spares=list(r.get("spares", [])),
                      metadata=r.get("metadata", "1.2"), chunk_kib=chunk_kib,
                      origin=r.get("origin", where), keep=r.get("keep", False) is True,
                      wipe=r.get("wipe"), table=r.get("table", "gpt"),
                      partitions=_partitions(r, where, problems),
                      on_member_failure=r.get("on_member_failure", "fail"))


def _bcache(b, where, problems):
    return model.Bcache(id=b["id"], name=b.get("name", b["id"].replace(":", "-")),
                        backing=b["backing_device"], cache=b.get("cache_device"),
                        cache_mode=b.get("cache_mode", "writethrough"),
                        origin=b.get("origin", where), table=b.get("table", "gpt"),
                        partitions=_partitions(b, where, problems))


def _vg(v, where, problems):
    vg = model.VolumeGroup(id=v["id"], name=v.get("name", v["id"]), pvs=list(v["pvs"]),
                           keep=v.get("keep", False) is True, origin=v.get("origin", where))
    for j, lv in enumerate(v.get("logical_volumes", [])):
        lwhere = f"{where}.logical_volumes[{j}]"
        vg.logical_volumes.append(model.LogicalVolume(
            id=lv["id"], name=lv.get("name", lv["id"]),
            size=_size(lv["size"], lwhere + ".size", problems),
            stripes=lv.get("stripes"), origin=lv.get("origin", lwhere)))
    return vg


def _encrypted(e, where, problems):
    unlock = e["unlock"]
    tpm2 = unlock.get("tpm2")
    key_file = unlock.get("key_file")
    if unlock.get("tang") == "conductor":
        problems.append(Problem(where + ".unlock.tang", '"conductor" stands for the Tang '
                                "servers of the Ironic conductor ([provision_agent]tang_server),"
                                " which puts them here before the layout leaves it; without "
                                "Ironic, list the servers"))
        unlock = {k: v for k, v in unlock.items() if k != "tang"}
    return model.Encrypted(
        id=e["id"], device=e["device"], name=e.get("name", e["id"].replace(":", "-")),
        cipher=e.get("cipher", "aes-xts-plain64"), key_size=e.get("key_size", 512),
        sector_size=e.get("sector_size"), discard=e.get("discard", False),
        tpm2_pcrs=None if tpm2 is None else list(tpm2.get("pcrs", [7])),
        tpm2_bank=(tpm2 or {}).get("bank", "sha256"),
        tang=[dict(t) for t in unlock.get("tang", [])], threshold=unlock.get("threshold", 1),
        key_file=model.KeyFile(key_file["uri"], key_file["checksum"],
                               key_file.get("allow_plain_root", False)) if key_file else None,
        passphrase=unlock.get("passphrase"), origin=e.get("origin", where))


def _filesystem(f, where):
    return model.Filesystem(
        device=f["device"], type=f["type"], mount=f.get("mount"), label=f.get("label"),
        mount_options=f.get("mount_options", "defaults"),
        mkfs_options=list(f.get("mkfs_options", [])), fstab_pass=f.get("fstab_pass"),
        fstab_freq=f.get("fstab_freq", 0), origin=f.get("origin", where))


def _image(im, where):
    return model.Image(
        uri=im["uri"], format=im.get("format", "raw"), target=im.get("target", "/"),
        compression=im.get("compression", "auto"), checksum=im.get("checksum"),
        checksum_of=im.get("checksum_of", "compressed"),
        allow_no_checksum=im.get("allow_no_checksum", False), origin=im.get("origin", where),
        checksum_url=im.get("checksum_url"), checksum_algo=im.get("checksum_algo"),
        authorization=im.get("authorization"), signature=im.get("signature"),
        allow_unsigned=im.get("allow_unsigned", False))
