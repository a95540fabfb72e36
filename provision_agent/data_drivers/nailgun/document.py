"""The types of the parts of Fuel's provision.json that the nailgun driver reads (shape.py
says why and how they are checked), and places named as the translation names them."""

import re

import jsonschema

from provision_agent.data_drivers import shape

# Bounds: longer values are no names, paths or keys, and would only slow the translation.
_STR = {"type": "string", "maxLength": 8192}
_OSTR = {"type": ["string", "null"], "maxLength": 8192}
_NUM = {"type": "number"}
_BOOLISH = {"type": ["boolean", "integer", "string", "null"]}

# A volume's type and size and a space's type are left to the translation, which says what
# they must be in Fuel's own terms.
_VOLUME = {"type": "object", "properties": {
    "mount": _OSTR,
    "file_system": _OSTR, "keep_data": _BOOLISH,
    "partition_guid": _OSTR, "vg": _OSTR,
    "lvm_meta_size": _NUM, "disk_label": _OSTR,
    "name": _OSTR}}

_SPACE = {"type": "object", "properties": {
    "id": {"type": ["string", "integer"]}, "name": _OSTR,
    "size": _NUM, "extra": {"type": ["array", "null"], "items": _STR},
    "volumes": {"type": "array", "items": _VOLUME}}}

_ACCOUNT = {"type": "object", "properties": {
    "name": _STR, "password": _STR, "ssh_keys": {"type": ["array", "string"]}, "shell": _STR,
    "homedir": _STR,
    "sudo": {"type": ["array", "string", "boolean"], "items": _STR}}}

SCHEMA = {"type": "object", "properties": {
    "hostname": _STR, "name": _STR, "uid": {"type": ["string", "integer"]},
    "interfaces": {"type": "object", "additionalProperties": {"type": "object", "properties": {
        "mac_address": _OSTR, "ip_address": _OSTR, "netmask": _OSTR, "static": _BOOLISH}}},
    "ks_meta": {"type": "object", "properties": {
        "pm_data": {"type": "object", "properties": {
            "ks_spaces": {"type": "array", "items": _SPACE},
            "kernel_params": _OSTR}},
        "image_data": {"type": ["object", "null"], "additionalProperties": {
            "type": "object", "properties": {"uri": _STR, "format": _STR,
                                             "container": _STR}}},
        # SSH keys: their sizes are checked, in Fuel's terms, where they are read (_keys).
        "authorized_keys": {"type": ["array", "string", "null"]},
        "auth_key": {"type": ["string", "null"]},
        "user_accounts": {"type": ["array", "null"], "items": _ACCOUNT},
        "repo_setup": {"type": ["object", "null"], "properties": {
            "repos": {"type": ["array", "null"], "items": {"type": "object"}}}},
        "timezone": _OSTR}}}}

_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
# Fuel's reservations: `boot` is the space of the bios_grub and UEFI partitions, the other one
# fuel-agent ignored.
IGNORED_TYPES = ("boot", "lvm_meta_pool")


def slug(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(text)).strip("-.") or "x"


def shown(value):
    """A value quoted in a message when short; the document may hold megabytes there."""
    return repr(value) if len(repr(value)) <= 40 else "this value"


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def used(volumes):
    """The volumes that make something: fuel-agent skipped size <= 0, boot and lvm_meta_pool."""
    return [(j, v) for j, v in enumerate(volumes)
            if isinstance(v, dict) and v.get("type") not in IGNORED_TYPES
            and is_num(v.get("size")) and v["size"] > 0]


def space_where(i, space):
    named = [space.get("name"), space.get("id")] if isinstance(space, dict) else []
    name = next((v for v in named if isinstance(v, (str, int)) and not isinstance(v, bool)
                 and v != ""), "?")
    return f"ks_spaces[{i}] ({name})"


def fuel_path(document, parts):
    """ks_meta.pm_data.ks_spaces[0].volumes[2].mount → ks_spaces[0] (sda) volumes[2].mount,
    as the translation names places (docs/nailgun-mapping.md); elsewhere dotted from the top."""
    parts = list(parts)
    if parts[:3] == ["ks_meta", "pm_data", "ks_spaces"] and len(parts) > 3:
        out = space_where(parts[3], document["ks_meta"]["pm_data"]["ks_spaces"][parts[3]])
        rest = parts[4:]
        if rest[:1] == ["volumes"] and len(rest) > 1:
            out += f" volumes[{rest[1]}]"
            rest = rest[2:]
        return out + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest)
    return shape.dotted(parts)


def check(document):
    """(problems, document without its wrongly typed values): see shape.check."""
    return shape.check(document, _VALIDATOR, fuel_path, "Fuel provision data")
