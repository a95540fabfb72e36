"""What a layout the tenant wrote or picked may not do to the operator's checks.

"Tenant" is whoever sets instance_info (Nova or metalsmith, for the tenant's instance): a
layout given inline in instance_info/provision_layout is the tenant's. A layout named there is
a file of the operator's in [provision_agent]layouts_dir, which the tenant only picks; deploy
templates, driver_info and the conductor's options are the operator's (layouts.py).

Applied by sent.payload(), so both when validate plans the deploy and when the document
is built for the ramdisk.
"""

import copy

from ironic_driver.document import crypt_defaults, layouts

# What an image of a layout may say to switch a check of the operator's off.
RELAXING = {"allow_unsigned": "signature verification against [provision_agent]image_keyring",
            "allow_no_checksum": "the image's checksum"}


def from_instance_info(choice):
    """Whether the deploy's requester chose this layout (wrote it, or named a file)."""
    return choice.source == "instance_info/" + layouts.FIELD


def tenants(choice):
    """Whether the deploy's requester wrote this layout."""
    return from_instance_info(choice) and choice.name is None


def check_relaxations(choice):
    """The tenant's own layout may not switch off the checks the operator set up: images with
    allow_unsigned or allow_no_checksum are refused."""
    if choice.layout is None or not tenants(choice):
        return
    images = choice.layout.get("images")
    for i, image in enumerate(images if isinstance(images, list) else ()):
        for key, what in RELAXING.items():
            if isinstance(image, dict) and image.get(key) not in (None, False):
                raise layouts._invalid(
                    choice.describe(), f"images[{i}].{key}: a layout given with the deploy "
                    f"may not switch off {what}. Sign the image (or give its checksum), or "
                    "have the operator provide a layout that allows it (a named layout in "
                    "[provision_agent]layouts_dir, a deploy template or driver_info/"
                    "provision_layout)")


def _items(obj, key):
    value = obj.get(key) if isinstance(obj, dict) else None
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def encrypted_mounts(layout):
    """The mount points (and "swap") of the filesystems a layout puts on encrypted volumes:
    on a volume itself, or on a logical volume of a group whose physical volumes all are."""
    under = {e.get("id") for e in _items(layout, "encrypted")}
    for vg in _items(layout, "volume_groups"):
        pvs = vg.get("pvs")
        if isinstance(pvs, list) and pvs and all(pv in under for pv in pvs):
            under.update(lv.get("id") for lv in _items(vg, "logical_volumes"))
    mounts = set()
    for fs in _items(layout, "filesystems"):
        if fs.get("device") in under:
            mounts.add("swap" if fs.get("type") == "swap" else fs.get("mount"))
    mounts.discard(None)
    return mounts


def keep_template_encryption(choice, template):
    """The layout to send for choice, when a deploy template's step chose `template` too.

    A layout from instance_info comes first, but may not drop the encryption the template's
    layout requires: every mount point (and swap) that one encrypts must stand on an encrypted
    volume here too, and the template's recovery recipients are added to this layout's."""
    layout = choice.layout
    if layout is None or template is None or not from_instance_info(choice) or \
            not template.layout or not template.layout.get("encrypted"):
        return layout
    missing = encrypted_mounts(template.layout) - encrypted_mounts(layout)
    if missing:
        raise layouts._invalid(
            choice.describe(), f"{template.describe()} encrypts "
            f"{', '.join(sorted(missing))}, which this layout leaves in the clear: a layout "
            "given with the deploy may not drop the encryption a deploy template requires. "
            "Put them on `encrypted` volumes, or deploy without instance_info/"
            "provision_layout (the template's layout then applies)")
    recovery = template.layout.get("recovery")
    recipients = recovery.get("age_recipients") if isinstance(recovery, dict) else None
    if isinstance(recipients, list) and recipients:
        layout = copy.deepcopy(layout)
        crypt_defaults.add_recipients(layout, recipients)
    return layout
