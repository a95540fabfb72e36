"""Ironic's node data (what the Ironic deploy interface serialises) → the native format.

    {"node_uuid": ..., "instance_info": {...},
     "properties": {"root_device": {...}, "skip_block_devices": [{...}]},
     "root_device_default": "smallest" (absent) | "refuse": without root device hints,
     "boot_mode": "bios" | "uefi", "secure_boot": bool (absent: false),
     "rebuild": bool: a rebuild of the same instance (absent: not known, taken as false),
     "layout": {optional native document},
 "extensions": {optional: plug-in sections deploy templates add to whatever layout it gets},
 "vendor": {optional, instead of layout: {"data_driver": NAME, "document": ...}}}

With `layout`, that native document is used and completed from instance_info (image, configdrive,
boot mode). Without it, Ironic's classic layouts are produced: a whole-disk image written to the
root disk, or a partition image with Ironic's partitions. Rules and reasons: docs/ironic-format.md.
"""

import copy

import jsonschema

from provision_agent.data_drivers import ironic_ephemeral as ephemeral
from provision_agent.data_drivers import ironic_fields as fields
from provision_agent.data_drivers import ironic_vendor, native, shape
from provision_agent.data_drivers.base import DataDriver
from provision_agent.errors import InputError, Problem
from provision_agent.plan import boot_mode as boot_mode_rule
from provision_agent.plan import keep_on_rebuild, local_paths, passphrases

# ironic-lib's defaults for the partitions it creates around a partition image.
ESP_MIB = 200
BIOS_GRUB_MIB = 1
CONFIGDRIVE_MIB = 64
ROOT_DISK = "root-disk"
# A layout may size a partition or a logical volume by the flavor: `"size": "root_gb"` takes
# instance_info.root_gb (a Nova flavor's disk), and so on.
FLAVOR_SIZES = {"root_gb": "GiB", "swap_mb": "MiB", "ephemeral_gb": "GiB"}


_STR = {"type": ["string", "null"], "maxLength": 8192}
# The types of what the translation reads (shape.py); root_gb and friends may be strings in
# Ironic, so fields.whole_number() converts those itself.
_SHAPE = jsonschema.Draft202012Validator({"type": "object", "properties": {
    "boot_mode": _STR, "secure_boot": {"type": ["boolean", "null"]},
    "layout": {"type": ["object", "null"]},
    # a vendor's own format, translated by its data driver (ironic_vendor.py)
    "vendor": {"type": ["object", "null"], "required": ["data_driver", "document"]},
    # sections of step-kind plug-ins a deploy template adds (the add_extensions step)
    "extensions": {"type": ["object", "null"], "maxProperties": 32},
    "root_device_default": {"enum": ["smallest", "refuse", None]},
    # the deploy interface's word: a rebuild of the instance an earlier deploy made (the
    # layout's "keep": "on_rebuild" is kept), or its first deploy (made anew)
    "rebuild": {"type": ["boolean", "null"]},
    "properties": {"type": ["object", "null"], "properties": {
        "root_device": {"type": ["object", "null"]},
        "skip_block_devices": {"type": ["array", "null"], "maxItems": 128}}},
    # instance_info's own type: native_document says what is missing in its own words.
    "instance_info": {"properties": dict(
        {key: _STR for key in ("image_source", "image_url", "image_os_hash_algo",
                               "image_os_hash_value", "image_checksum", "image_disk_format",
                               "kernel", "ramdisk", "ephemeral_format", "image_fs_type",
                               "image_type")},
        # Ironic's OCI resolution: the registry's Authorization header for image_url
        image_request_authorization_secret={"type": ["string", "null"], "maxLength": 16384},
        # a detached OpenPGP signature of the image: a URL, or the armour itself
        image_signature={"type": ["string", "null"], "maxLength": 65536},
        capabilities={"type": ["object", "string", "null"]},
        root_device={"type": ["object", "null"]},
        configdrive={"type": ["object", "string", "null"], "maxLength": 96000000},
        # Nova's rebuild --preserve-ephemeral; Ironic also takes its strings ("True", "no")
        preserve_ephemeral={"type": ["boolean", "string", "null"], "maxLength": 8})}}})


def _root_disk(data, add):
    """The native disk Ironic's classic layouts go on: the root device hints, else Ironic's
    root disk without hints, the smallest of at least 4 GiB (an operator's
    [provision_agent]root_device_hints_required sends "refuse" instead); never one of the
    node's skip_block_devices."""
    hints, origin = fields.hints(data, add)
    disk = {"id": ROOT_DISK, "match": hints, "origin": origin or "root disk"}
    if origin is None and data.get("root_device_default") != "refuse":
        disk["pick"] = "smallest"
        disk["origin"] = ("root disk (no root device hints: the smallest disk of at least "
                          "4 GiB, as Ironic picks)")
    skips = fields.skip_list(data, add)
    if skips:
        disk["exclude"] = skips
    return disk


def whole_disk(info):
    """Ironic's answer (common/images.py is_whole_disk_image): image_type when set, which is
    how an image that is no Glance image is named a partition image, else an image without
    kernel and ramdisk. Deciding by kernel and ramdisk alone wrote a partition image given
    with image_type=partition over the whole root disk."""
    if info.get("image_type"):
        return info["image_type"] != "partition"
    return not info.get("kernel") and not info.get("ramdisk")


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
        secure_boot = bool(data.get("secure_boot"))
        if secure_boot and boot_mode != "uefi":
            add("secure_boot", f"Secure Boot needs UEFI, but the boot mode is {boot_mode!r}")
        if data.get("vendor") is not None:
            made = ironic_vendor.native(data["vendor"], add)
            if made is None:
                raise InputError(problems)
            doc = self._from_layout(made, info, boot_mode, secure_boot, add,
                                    data.get("rebuild"))
        elif data.get("layout") is not None:
            doc = self._from_layout(data["layout"], info, boot_mode, secure_boot, add,
                                    data.get("rebuild"))
        else:
            doc = self._classic(data, info, boot_mode, add)
            # the partition image's grub: signed when Ironic turns Secure Boot on
            boot_mode_rule.apply(doc, boot_mode, add, where="bootloader", secure_boot=secure_boot)
        add_extensions(doc, data.get("extensions"), add)
        if problems:
            raise InputError(problems)
        return doc

    # --- a full native layout given --------------------------------------------------------

    def _from_layout(self, layout, info, boot_mode, secure_boot, add, rebuild=None):
        if not isinstance(layout, dict):
            add("layout", "must be a native-format document (an object)")
            return {}
        doc = copy.deepcopy(layout)
        if keep_on_rebuild.apply(doc, bool(rebuild), add):
            self.warnings.append(
                "a rebuild of the same instance: what the layout keeps on rebuild is kept"
                if rebuild else "a first deploy: what the layout keeps on rebuild is made anew")
        if self._preserve({"rebuild": rebuild}, info, add):
            ephemeral.in_layout(doc, info, add, self.warnings)
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
        for where, what in local_paths.local_paths(doc):
            add(f"layout.{where}", local_paths.refusal(what))
        for where in passphrases.passphrases(doc):
            add(f"layout.{where}", passphrases.REFUSAL)
        if not doc.get("images"):
            target, whole = _root_target(doc)
            if target is None:
                add("layout", "no image in the layout and nowhere to put instance_info's: no "
                              "filesystem mounts at / and no disk is free of partitions")
            else:
                image = fields.image(info, add, target, whole)
                if image:
                    doc["images"] = [image]
        if "configdrive" not in doc and info.get("configdrive"):
            doc["configdrive"] = fields.configdrive(info["configdrive"], add)
        boot_mode_rule.apply(doc, boot_mode, add, where="layout.bootloader",
                             secure_boot=secure_boot)
        return doc

    # --- Ironic's classic layouts ----------------------------------------------------------

    def _classic(self, data, info, boot_mode, add):
        disk = _root_disk(data, add)
        doc = {"version": 1, "disks": [disk], "filesystems": []}
        if whole_disk(info):
            return self._whole_disk(doc, info, boot_mode, add)
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
        ephemeral.partitions(info, doc, parts, add, self._preserve(data, info, add))
        if info.get("configdrive"):
            parts.append({"id": "configdrive", "size": CONFIGDRIVE_MIB,
                          "origin": "instance_info.configdrive"})
            if label == "gpt":
                parts[-1]["name"] = "config-2"
            cd = fields.configdrive(info["configdrive"], add)
            cd["partition"] = "configdrive"
            doc["configdrive"] = cd
        root = fields.whole_number(info, "root_gb", add)
        if not root:
            add("instance_info.root_gb", "a partition image needs root_gb (GiB) > 0")
            root = 1
        parts.append({"id": "root", "size": f"{root}GiB", "origin": "instance_info.root_gb"})
        # The partition image brings its filesystem; Ironic does not say which, so the type
        # (used to grow it) is instance_info.image_fs_type, default ext4.
        doc["filesystems"].append({"device": "root", "type": info.get("image_fs_type") or "ext4",
                                   "mount": "/", "origin": "instance_info.image_source"})
        image = fields.image(info, add, "root", False)
        doc["images"] = [image] if image else []
        doc["bootloader"] = {"boot_mode": boot_mode, "origin": "boot_mode"}
        return doc

    def _preserve(self, data, info, add):
        """preserve_ephemeral, unless the deploy interface says this is the instance's first
        deploy (document "rebuild": false): then nothing on the disk is the instance's, and
        on a disk no cleaning erased it could be a previous tenant's."""
        if not fields.flag(info, "preserve_ephemeral", add):
            return False
        if data.get("rebuild") is False:
            self.warnings.append("instance_info.preserve_ephemeral on the instance's first "
                                 "deploy: nothing on the disk is its own, the ephemeral "
                                 "partition is made anew")
            return False
        return True

    def _whole_disk(self, doc, info, boot_mode, add):
        if fields.flag(info, "preserve_ephemeral", add):
            self.warnings.append(
                "instance_info.preserve_ephemeral has no effect on a whole-disk image: "
                "the image is written over the whole disk, as Ironic does")
        image = fields.image(info, add, ROOT_DISK, True)
        doc["images"] = [image] if image else []
        if info.get("configdrive"):
            # as Ironic does: a partition added after the image's own, once it is written
            doc["configdrive"] = dict(fields.configdrive(info["configdrive"], add),
                                      disk=ROOT_DISK)
        # its own bootloader (and signed chain); in UEFI mode the NVRAM entry IPA makes
        doc["bootloader"] = {"type": "image", "boot_mode": boot_mode,
                             "origin": "instance_info (whole-disk image)"}
        return doc


def _flavor_sizes(doc, info, add):
    """Replaces `"size": "root_gb"` (swap_mb, ephemeral_gb) by instance_info's value; returns
    the keys used."""
    used = set()

    def take(item, where):
        key = item.get("size") if isinstance(item, dict) else None
        if not isinstance(key, str) or key not in FLAVOR_SIZES:
            return
        used.add(key)
        value = fields.whole_number(info, key, add)
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


def add_extensions(doc, extra, add):
    """The plug-in sections deploy templates add (`extensions`), after the layout's own: a
    name the layout already has is refused, never replaced."""
    if not extra:
        return
    own = doc.setdefault("extensions", {})
    for name, section in extra.items():
        if name in own:
            add(f"extensions.{name}", f"the layout has its own '{name}' section; a deploy "
                                      "template adds a plug-in's section to a layout without "
                                      "one, it never replaces it")
        else:
            own[name] = copy.deepcopy(section)
