"""Where a native layout, as given (a dict), names a file of the machine provision runs on
instead of a URL: an image's `uri` or `signature`, or an encrypted volume's key file.

A document from Ironic comes from a tenant (instance_info) or is sent by a conductor; either
way a path there reads the ramdisk's own files, e.g. the job's input document with the
registry's Authorization header, and an image or key file copies them onto a disk the tenant
reads. So the ironic data driver and the conductor refuse them (docs/security.md); a layout
given to provision by hand may name local files.
"""

WHAT = {"uri": "image", "signature": "signature", "key_file": "key file"}


def is_local(value):
    return isinstance(value, str) and (value.startswith("/")
                                       or value[:7].lower() == "file://")


def _items(obj, key):
    value = obj.get(key) if isinstance(obj, dict) else None
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def local_paths(layout):
    """[(location, what)] of every local path the layout names; never the value itself (a
    key file's location and a signature may be secrets)."""
    found = []
    for i, image in enumerate(_items(layout, "images")):
        for key in ("uri", "signature"):
            if is_local(image.get(key)):
                found.append((f"images[{i}].{key}", WHAT[key]))
    for i, volume in enumerate(_items(layout, "encrypted")):
        unlock = volume.get("unlock")
        key_file = unlock.get("key_file") if isinstance(unlock, dict) else None
        if isinstance(key_file, dict) and is_local(key_file.get("uri")):
            found.append((f"encrypted[{i}].unlock.key_file.uri", WHAT["key_file"]))
    return found


def refusal(what):
    return (f"a path in the ramdisk: through Ironic the {what} must come over http(s), since a "
            "file of the ramdisk (its job files, the registry's Authorization header) would "
            "be copied onto the disk")
