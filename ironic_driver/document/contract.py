"""The input document the deploy interface hands to `provision --data_driver ironic`.

This is the contract with the ironic data driver; keep both sides in step:

    {"node_uuid": str,
     "instance_info": node.instance_info (image_source, checksums, root_gb, swap_mb, ...),
     "properties": {"root_device": node.properties["root_device"],   (key absent without hints)
                    "skip_block_devices": [...]},                    (key absent without one)
     "root_device_default": "refuse"   (only with [provision_agent]root_device_hints_required;
                                        absent: Ironic's smallest disk of at least 4 GiB),
     "boot_mode": "bios" | "uefi",
     "secure_boot": bool: Ironic turns Secure Boot on for the instance (its capabilities),
     "rebuild": bool: a rebuild of the instance an earlier deploy made (rebuild.py): the
                layout's "keep": "on_rebuild" is kept; false: made anew,
     "layout": the layout chosen for this deploy (layouts.py)            (key absent: classic)}
"""

import copy

from ironic.conf import CONF

from ironic_driver.document import crypt_defaults, rebuild


def boot_mode_of(node):
    """The boot mode Ironic boots the instance in: Ironic's own answer
    (boot_mode_utils.get_boot_mode: secure boot, then the instance's and the node's
    capabilities, then [deploy]default_boot_mode, uefi unless changed). Raises Ironic's
    InvalidParameterValue when the instance asks for a mode the node's capabilities forbid."""
    # deploy_utils first: it and boot_mode_utils import each other.
    from ironic.drivers.modules import (
        boot_mode_utils,
        deploy_utils,  # noqa: F401
    )
    return boot_mode_utils.get_boot_mode(node)


def secure_boot_requested(node):
    from ironic.drivers.modules import (
        boot_mode_utils,
        deploy_utils,  # noqa: F401
    )
    return boot_mode_utils.is_secure_boot_requested(node)


# The ramdisk gets the header Ironic's OCI resolution made of the pull secret
# (image_request_authorization_secret), never the pull secret itself.
NOT_SENT = ("image_pull_secret",)


def build(node, layout=None):
    instance_info = copy.deepcopy({k: v for k, v in (node.instance_info or {}).items()
                                   if k not in NOT_SENT})
    doc = {"node_uuid": node.uuid,
           "instance_info": instance_info,
           "properties": {},
           "boot_mode": boot_mode_of(node),
           # a layout's "keep": "on_rebuild" is kept on a rebuild of the same instance only
           "rebuild": rebuild.is_rebuild(node),
           "secure_boot": secure_boot_requested(node)}
    for key in ("root_device", "skip_block_devices"):
        value = (node.properties or {}).get(key)
        if value:
            doc["properties"][key] = copy.deepcopy(value)
    if CONF.provision_agent.root_device_hints_required:
        doc["root_device_default"] = "refuse"
    if layout:
        doc["layout"] = crypt_defaults.apply(copy.deepcopy(layout))
    return doc
