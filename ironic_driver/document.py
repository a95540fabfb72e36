"""The input document the deploy interface hands to `provision --data_driver ironic`.

This is the contract with the ironic data driver; keep both sides in step:

    {"node_uuid": str,
     "instance_info": node.instance_info (image_source, checksums, root_gb, swap_mb, ...),
     "properties": {"root_device": node.properties["root_device"]}   (key absent without hints),
     "boot_mode": "bios" | "uefi",
     "layout": the layout chosen for this deploy (layouts.py)            (key absent: classic)}
"""

import copy
import json

BOOT_MODES = ("bios", "uefi")


def boot_mode_of(node, default="bios"):
    """The boot mode Ironic will boot the instance in.

    Ironic keeps it in three places; the instance's request wins, then what the management
    interface reported, then the node's capabilities string.
    """
    mode = (node.instance_info or {}).get("deploy_boot_mode")
    if mode not in BOOT_MODES:
        mode = getattr(node, "boot_mode", None)
    if mode not in BOOT_MODES:
        caps = (node.properties or {}).get("capabilities") or ""
        if isinstance(caps, dict):
            mode = caps.get("boot_mode")
        else:
            for item in str(caps).split(","):
                key, _, value = item.partition(":")
                if key.strip() == "boot_mode":
                    mode = value.strip()
    return mode if mode in BOOT_MODES else default


def build(node, default_boot_mode="bios", layout=None):
    instance_info = copy.deepcopy(dict(node.instance_info or {}))
    doc = {"node_uuid": node.uuid,
           "instance_info": instance_info,
           "properties": {},
           "boot_mode": boot_mode_of(node, default_boot_mode)}
    hints = (node.properties or {}).get("root_device")
    if hints:
        doc["properties"]["root_device"] = copy.deepcopy(hints)
    if layout:
        doc["layout"] = copy.deepcopy(layout)
    return doc


def serialise(node, default_boot_mode="bios", layout=None):
    return json.dumps(build(node, default_boot_mode, layout), indent=1, sort_keys=True)
