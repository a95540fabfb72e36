"""What a layout the tenant wrote may not do to the operator's checks.

"Tenant" is whoever sets instance_info (Nova or metalsmith, for the tenant's instance): a
layout given inline in instance_info/provision_layout is the tenant's. A layout named there is
a file of the operator's in [provision_agent]layouts_dir, which the tenant only picks; deploy
templates, driver_info and the conductor's options are the operator's (layouts.py).

Applied by validation.payload(), so both when validate plans the deploy and when the document
is built for the ramdisk.
"""

from ironic_driver import layouts

# What an image of a layout may say to switch a check of the operator's off.
RELAXING = {"allow_unsigned": "signature verification against [provision_agent]image_keyring",
            "allow_no_checksum": "the image's checksum"}


def tenants(choice):
    """Whether the deploy's requester wrote this layout."""
    return choice.source == "instance_info/" + layouts.FIELD and choice.name is None


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
