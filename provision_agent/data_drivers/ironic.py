"""Ironic's node data (what the Ironic deploy interface serialises) → the native format.

    {"node_uuid": ..., "instance_info": {...}, "properties": {"root_device": {...}},
     "boot_mode": "bios" | "uefi", "layout": {optional native document}}

With `layout`, that native document is used and completed from instance_info (image, configdrive,
boot mode). Without it, Ironic's classic layouts are produced: a whole-disk image written to the
root disk, or a partition image with Ironic's partitions. Rules and reasons: docs/ironic-format.md.
"""

import copy

import jsonschema

from provision_agent.data_drivers import native, shape
from provision_agent.data_drivers.base import DataDriver
from provision_agent.errors import InputError, Problem

# ironic-lib's defaults for the partitions it creates around a partition image.
ESP_MIB = 200
BIOS_GRUB_MIB = 1
CONFIGDRIVE_MIB = 64
HINTS = {"name", "by_path", "serial", "wwn", "model", "vendor", "hctl", "size", "rotational"}
UNSUPPORTED_HINTS = {"wwn_with_extension", "wwn_vendor_extension"}
# Without hints Ironic takes the smallest disk of at least 4 GiB. A data driver sees no inventory,
# so it asks for "a disk of at least 4 GiB" and resolution refuses when more than one matches:
# never guess which disk to overwrite.
DEFAULT_HINTS = {"size": ">= 4"}
CHECKSUM_ALGOS = ("md5", "sha256", "sha512")
ROOT_DISK = "root-disk"
# A layout may size a partition or a logical volume by the flavor: `"size": "root_gb"` takes
# instance_info.root_gb (a Nova flavor's disk), and so on.
FLAVOR_SIZES = {"root_gb": "GiB", "swap_mb": "MiB", "ephemeral_gb": "GiB"}


_STR = {"type": ["string", "null"], "maxLength": 8192}
# The types of what the translation reads (shape.py); root_gb and friends may be strings in
# Ironic, so _int() converts those itself.
_SHAPE = jsonschema.Draft202012Validator({"type": "object", "properties": {
    "boot_mode": _STR, "layout": {"type": ["object", "null"]},
    "properties": {"type": ["object", "null"], "properties": {
        "root_device": {"type": ["object", "null"]}}},
    # instance_info's own type: native_document says what is missing in its own words.
    "instance_info": {"properties": dict(
        {key: _STR for key in ("image_source", "image_url", "image_os_hash_algo",
                               "image_os_hash_value", "image_checksum", "image_disk_format",
                               "kernel", "ramdisk", "ephemeral_format", "image_fs_type")},
        # Ironic's OCI resolution: the registry's Authorization header for image_url
        image_request_authorization_secret={"type": ["string", "null"], "maxLength": 16384},
        capabilities={"type": ["object", "string", "null"]},
        configdrive={"type": ["object", "string", "null"], "maxLength": 96000000})}}})


class IronicDriver(DataDriver):
    def layout(self):
        layout = native.NativeDriver(self.native_document()).layout()
        layout.warnings.extend(self.warnings)
        return layout

    def native_document(self):
        self.warnings = []      # shown with the plan: what of instance_info the layout ignores
        problems, data = shape.check(self.data, _SHAPE, what="Ironic document")
        data = {} if data is None else data
        add = lambda where, msg: problems.append(Problem(where, msg))  # noqa: E731
        info = data.get("instance_info")
        if not isinstance(info, dict):
            add("instance_info", "missing: the node's instance_info object")
            raise InputError(problems)
        boot_mode = data.get("boot_mode", "bios")
        if boot_mode not in ("bios", "uefi"):
            add("boot_mode", f"{boot_mode!r} is not bios or uefi")
            boot_mode = "bios"
        if data.get("layout") is not None:
            doc = self._from_layout(data["layout"], info, boot_mode, add)
        else:
            doc = self._classic(data, info, boot_mode, add)
        if problems:
            raise InputError(problems)
        return doc

    # --- a full native layout given --------------------------------------------------------

    def _from_layout(self, layout, info, boot_mode, add):
        if not isinstance(layout, dict):
            add("layout", "must be a native-format document (an object)")
            return {}
        doc = copy.deepcopy(layout)
        used = _flavor_sizes(doc, info, add)
        for key in FLAVOR_SIZES:
            value = info.get(key)
            if key not in used and value not in (None, 0, "0", ""):
                # Nova always sends root_gb; a layout that sizes / itself does not use it.
                self.warnings.append(
                    f"instance_info.{key} ({value}) is not used: the layout sizes its volumes "
                    f"itself (a partition or logical volume with \"size\": \"{key}\" takes "
                    "it)")
        problems = native.schema_problems(doc)
        for p in problems:
            add("layout" + p.location[1:], p.message)
        if problems:
            return doc
        if not doc.get("images"):
            target, whole = _root_target(doc)
            if target is None:
                add("layout", "no image in the layout and nowhere to put instance_info's: no "
                              "filesystem mounts at / and no disk is free of partitions")
            else:
                image = _image(info, add, target, whole)
                if image:
                    doc["images"] = [image]
        if "configdrive" not in doc and info.get("configdrive"):
            doc["configdrive"] = _configdrive(info["configdrive"], add)
        apply_boot_mode(doc, boot_mode, add, where="layout.bootloader.boot_mode")
        return doc

    # --- Ironic's classic layouts ----------------------------------------------------------

    def _classic(self, data, info, boot_mode, add):
        disk = {"id": ROOT_DISK, "match": _hints(data, add),
                "origin": "properties.root_device"}
        doc = {"version": 1, "disks": [disk], "filesystems": []}
        whole = not info.get("kernel") and not info.get("ramdisk")
        if whole:
            image = _image(info, add, ROOT_DISK, True)
            doc["images"] = [image] if image else []
            if info.get("configdrive"):
                # as Ironic does: a partition added after the image's own, once it is written
                doc["configdrive"] = dict(_configdrive(info["configdrive"], add), disk=ROOT_DISK)
            # The image brings its own bootloader.
            doc["bootloader"] = {"type": "none", "origin": "instance_info (whole-disk image)"}
            return doc
        caps = info.get("capabilities") or {}
        label = caps.get("disk_label") if isinstance(caps, dict) else None
        label = label or ("gpt" if boot_mode == "uefi" else "msdos")
        if label not in ("gpt", "msdos"):
            add("instance_info.capabilities.disk_label", f"{label!r} is not gpt or msdos")
            label = "gpt"
        disk["table"] = label
        parts = disk["partitions"] = []
        if boot_mode == "uefi":
            parts.append({"id": "efi-part", "size": ESP_MIB, "type": "esp", "origin": "boot_mode"})
            doc["filesystems"].append({"device": "efi-part", "type": "vfat", "mount": "/boot/efi",
                                       "label": "efi-part", "origin": "boot_mode"})
        elif label == "gpt":
            parts.append({"id": "bios-boot", "size": BIOS_GRUB_MIB, "type": "bios_grub",
                          "origin": "boot_mode"})
        eph = _int(info, "ephemeral_gb", add)
        if eph:
            parts.append({"id": "ephemeral0", "size": f"{eph}GiB",
                          "origin": "instance_info.ephemeral_gb"})
            doc["filesystems"].append({"device": "ephemeral0",
                                       "type": info.get("ephemeral_format") or "ext4",
                                       "label": "ephemeral0",
                                       "origin": "instance_info.ephemeral_format"})
        swap = _int(info, "swap_mb", add)
        if swap:
            parts.append({"id": "swap1", "size": swap, "type": "swap",
                          "origin": "instance_info.swap_mb"})
            doc["filesystems"].append({"device": "swap1", "type": "swap", "label": "swap1",
                                       "origin": "instance_info.swap_mb"})
        if info.get("configdrive"):
            parts.append({"id": "configdrive", "size": CONFIGDRIVE_MIB,
                          "origin": "instance_info.configdrive"})
            if label == "gpt":
                parts[-1]["name"] = "config-2"
            cd = _configdrive(info["configdrive"], add)
            cd["partition"] = "configdrive"
            doc["configdrive"] = cd
        root = _int(info, "root_gb", add)
        if not root:
            add("instance_info.root_gb", "a partition image needs root_gb (GiB) > 0")
            root = 1
        parts.append({"id": "root", "size": f"{root}GiB", "origin": "instance_info.root_gb"})
        # The partition image brings its filesystem; Ironic does not say which, so the type
        # (used to grow it) is instance_info.image_fs_type, default ext4.
        doc["filesystems"].append({"device": "root", "type": info.get("image_fs_type") or "ext4",
                                   "mount": "/", "origin": "instance_info.image_source"})
        image = _image(info, add, "root", False)
        doc["images"] = [image] if image else []
        doc["bootloader"] = {"boot_mode": boot_mode, "origin": "boot_mode"}
        return doc


def apply_boot_mode(doc, boot_mode, add, where, create=True):
    """The layout's grub installs for the mode Ironic boots the node in: a layout that leaves
    it open (or says auto) gets Ironic's; one that names the other mode is refused, since the
    machine would boot in Ironic's mode into a bootloader made for the other. create: give a
    layout without a bootloader section one (grub2)."""
    bootloader = doc.setdefault("bootloader", {}) if create else doc.get("bootloader")
    if not isinstance(bootloader, dict) or bootloader.get("type", "grub2") == "none":
        return
    given = bootloader.get("boot_mode", "auto")
    if given == "auto":
        bootloader["boot_mode"] = boot_mode
        bootloader.setdefault("origin", "boot_mode")
    elif given != boot_mode:
        add(where, f"{given!r}, but Ironic boots this node in {boot_mode!r} (the instance's "
                   "or the node's capabilities boot_mode, else [deploy]default_boot_mode): "
                   "make the two agree")


def _flavor_sizes(doc, info, add):
    """Replaces `"size": "root_gb"` (swap_mb, ephemeral_gb) by instance_info's value; returns
    the keys used."""
    used = set()

    def take(item, where):
        key = item.get("size") if isinstance(item, dict) else None
        if not isinstance(key, str) or key not in FLAVOR_SIZES:
            return
        used.add(key)
        value = _int(info, key, add)
        if value:
            item["size"] = f"{value}{FLAVOR_SIZES[key]}"
        else:
            add(where + ".size", f"refers to instance_info.{key}, which this deploy does not "
                                 "set (or sets to 0)")
            item["size"] = 1     # so that the rest of the layout is still checked

    for i, disk in enumerate(_items(doc, "disks")):
        for j, part in enumerate(_items(disk, "partitions")):
            take(part, f"layout.disks[{i}].partitions[{j}]")
    for i, vg in enumerate(_items(doc, "volume_groups")):
        for j, lv in enumerate(_items(vg, "logical_volumes")):
            take(lv, f"layout.volume_groups[{i}].logical_volumes[{j}]")
    return used


def _items(obj, key):
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, list) else []


def _int(info, key, add):
    value = info.get(key) or 0
    try:
        value = int(value)
    except (TypeError, ValueError):
        add(f"instance_info.{key}", f"{value!r} is not a whole number")
        return 0
    if value < 0:
        add(f"instance_info.{key}", "may not be negative")
        return 0
    return value


def _hints(data, add):
    props = data.get("properties") or {}
    hints = props.get("root_device") if isinstance(props, dict) else None
    if not hints:
        return dict(DEFAULT_HINTS)
    if not isinstance(hints, dict):
        add("properties.root_device", "must be an object of root device hints")
        return dict(DEFAULT_HINTS)
    result = {}
    for key, value in hints.items():
        where = f"properties.root_device.{key}"
        if key in UNSUPPORTED_HINTS or key not in HINTS:
            add(where, f"root device hint {key!r} is not supported (supported: "
                       f"{', '.join(sorted(HINTS))})")
        elif key == "rotational":
            if isinstance(value, str):
                value = value.strip().lower() in ("true", "1", "yes", "on")
            result[key] = bool(value)
        elif key == "size":
            result[key] = value if isinstance(value, (int, str)) else str(value)
        else:
            result[key] = str(value)
    return result or dict(DEFAULT_HINTS)


def _checksum(info, add):
    """The native image's checksum fields: {"checksum": "algo:hex"}, or, for a checksum given
    as the URL of a checksum file (as Ironic and ironic-python-agent take it, in
    image_checksum or image_os_hash_value), {"checksum_url": ..., "checksum_algo": ...}: the
    ramdisk reads that file right before the image."""
    algo, value = info.get("image_os_hash_algo"), info.get("image_os_hash_value")
    if algo and algo not in CHECKSUM_ALGOS:
        add("instance_info.image_os_hash_algo",
            f"{algo!r} is not one of {', '.join(CHECKSUM_ALGOS)}")
        return {}
    if value and _is_url(value):
        return _checksum_url(value, algo)
    if algo and value:
        return {"checksum": f"{algo}:{value}"}
    legacy = info.get("image_checksum")
    if legacy:
        if _is_url(legacy):
            # Ironic: the digest's length says the algorithm, unless image_os_hash_algo does
            return _checksum_url(legacy, algo)
        if legacy.partition(":")[0] in CHECKSUM_ALGOS:
            return {"checksum": legacy}
        algo = {32: "md5", 64: "sha256", 128: "sha512"}.get(len(legacy))
        if not algo or ":" in legacy:
            add("instance_info.image_checksum", "not an md5, sha256 or sha512 hex digest, nor "
                                                "the http(s) URL of a checksum file")
            return {}
        return {"checksum": f"{algo}:{legacy}"}
    add("instance_info", "no image checksum: give image_os_hash_algo and image_os_hash_value, "
                         "or image_checksum (a digest or the URL of a checksum file)")
    return {}


def _is_url(value):
    return str(value).startswith(("http://", "https://"))


def _checksum_url(url, algo):
    return {"checksum_url": url, **({"checksum_algo": algo} if algo else {})}


# What Ironic's OCI resolution sets image_disk_format to when it cannot name a disk format.
OCI_FORMATS = {
    "unknown": "Ironic could not tell the OCI artifact's disk type (a reference by manifest "
               "digest carries none): reference it by tag with a 'disktype' annotation, or "
               "set image_disk_format to raw or qcow2 before the deploy",
    "bootc": "the OCI reference is a container image (bootc), not a disk image artifact: "
             "this deploy interface writes disk images only"}


def _image(info, add, target, whole):
    uri = info.get("image_url") or info.get("image_source")
    if str(uri).startswith("oci://"):
        add("instance_info.image_source",
            f"{uri!r} has not been resolved: the deploy interface resolves an oci:// "
            "reference to its blob's URL (image_url) when it prepares the deploy")
        return None
    if not uri or not str(uri).startswith(("http://", "https://", "file://", "/")):
        add("instance_info.image_source",
            f"{uri!r} is not a URL or path; the deploy interface passes a URL (image_url)")
        return None
    fmt = info.get("image_disk_format") or "raw"
    if fmt in OCI_FORMATS:
        add("instance_info.image_disk_format", f"{fmt!r}: {OCI_FORMATS[fmt]}")
        return None
    if fmt not in ("raw", "qcow2"):
        add("instance_info.image_disk_format", f"{fmt!r} is not raw or qcow2")
        return None
    native_format = ("disk" if fmt == "raw" else "qcow2") if whole else fmt
    image = {"uri": uri, "format": native_format, "target": target,
             "origin": "instance_info.image_source"}
    image.update(_checksum(info, add))
    auth = info.get("image_request_authorization_secret")
    if auth and not (auth[0] != " " and all(" " <= c <= "~" for c in auth)):
        # named by Ironic's field, and never echoed: it is a credential
        add("instance_info.image_request_authorization_secret",
            "is not an HTTP header value (printable ASCII without a leading blank)")
    elif auth:
        # As ironic-python-agent gets it: the header for the image's own download.
        image["authorization"] = auth
    return image


def _configdrive(value, add):
    if isinstance(value, str):
        return {"format": "config-2", "content": value, "origin": "instance_info.configdrive"}
    if isinstance(value, dict):
        cd = {"format": "config-2", "origin": "instance_info.configdrive"}
        for key in ("meta_data", "network_data"):
            if isinstance(value.get(key), dict):
                cd[key] = value[key]
        if value.get("user_data") is not None:
            ud = value["user_data"]
            cd["user_data"] = ud if isinstance(ud, str) else str(ud)
        return cd
    add("instance_info.configdrive", "must be a string (gzip+base64 ISO or URL) or an object")
    return {"format": "config-2", "origin": "instance_info.configdrive"}


def _root_target(doc):
    """Where instance_info's image goes in a given layout: the device mounted at /, else a disk
    without partitions (whole-disk image)."""
    for fs in doc.get("filesystems", []):
        if fs.get("mount") == "/":
            return fs["device"], False
    for d in doc.get("disks", []):
        if not d.get("partitions"):
            return d["id"], True
    return None, False
