"""The signature policy, checked at plan time: what an image's signature needs and what a
configured keyring demands. The writer applies the same rules again before it touches the
target (drivers/images/signature.py), for a plan made elsewhere."""

from provision_agent.errors import Problem


def problems(layout, keyring):
    """keyring: whether a keyring is configured (--image_keyring, or the conductor's
    [provision_agent]image_keyring that is sent with the document)."""
    found = []
    for n, im in enumerate(layout.images):
        where = im.origin or f"$.images[{n}]"
        if im.signature and not keyring:
            found.append(Problem(where, "a signature is given, but no keyring is configured "
                                        "to verify it against (--image_keyring)"))
        elif keyring and not im.signature and not im.allow_unsigned:
            found.append(Problem(where, "no signature: a keyring is configured "
                                        "(--image_keyring), so unsigned images are refused; "
                                        "give signature, or set allow_unsigned to write it "
                                        "unverified"))
    return found
