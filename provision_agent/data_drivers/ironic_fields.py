"""Ironic's instance_info and properties fields as pieces of a native document: the image
(URL, format, checksum, or a checksum file's URL; an OCI artifact's digest and authorization),
root device hints, the configdrive. Each problem names the Ironic field."""

from provision_agent.plan import local_paths

HINTS = {"name", "by_path", "serial", "wwn", "model", "vendor", "hctl", "size", "rotational"}
UNSUPPORTED_HINTS = {"wwn_with_extension", "wwn_vendor_extension"}
# Without hints Ironic takes the smallest disk of at least 4 GiB. A data driver sees no inventory,
# so it asks for "a disk of at least 4 GiB" and resolution refuses when more than one matches:
# never guess which disk to overwrite.
DEFAULT_HINTS = {"size": ">= 4"}
CHECKSUM_ALGOS = ("md5", "sha256", "sha512")


def whole_number(info, key, add):
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


# oslo.utils' strutils.bool_from_string(strict=True), how Ironic reads preserve_ephemeral
TRUE_STRINGS = ("1", "t", "true", "on", "y", "yes")
FALSE_STRINGS = ("0", "f", "false", "off", "n", "no")


def flag(info, key, add):
    """A boolean field as Ironic reads it (deploy_utils.parse_instance_info): a bool or one of
    strutils' strings; anything else is refused rather than taken as false."""
    value = info.get(key)
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in TRUE_STRINGS or text in FALSE_STRINGS:
        return text in TRUE_STRINGS
    add(f"instance_info.{key}", f"{value!r} is not a boolean (true or false)")
    return False


def hints(data, add):
    """(the root device hints, the field they came from, or None without any): Ironic's
    rule (deploy_utils.get_root_device_for_deploy) is instance_info/root_device, else
    properties/root_device."""
    info = data.get("instance_info") or {}
    props = data.get("properties") or {}
    for origin, hints in (("instance_info.root_device", info.get("root_device")),
                          ("properties.root_device", props.get("root_device"))):
        if hints:
            return _hints(hints, origin, add), origin
    return dict(DEFAULT_HINTS), None


def _hints(hints, origin, add):
    if not isinstance(hints, dict):
        add(origin, "must be an object of root device hints")
        return dict(DEFAULT_HINTS)
    result = {}
    for key, value in hints.items():
        where = f"{origin}.{key}"
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


def skip_list(data, add):
    """properties/skip_block_devices: the disks Ironic never writes (each a hint set; IPA takes
    `name` and `volume_name`: a RAID volume's name, which no disk here has, is left out)."""
    skips = (data.get("properties") or {}).get("skip_block_devices") or []
    if not isinstance(skips, list) or not all(isinstance(h, dict) for h in skips):
        add("properties.skip_block_devices", "must be a list of objects of root device hints")
        return []
    out = []
    for i, h in enumerate(skips[:128]):
        hints = {k: v for k, v in h.items() if k != "volume_name"}
        if hints:
            out.append(_hints(hints, f"properties.skip_block_devices[{i}]", add))
    return out


def checksum(info, add):
    """The native image's checksum fields: {"checksum": "algo:hex"}, or, for a checksum given
    as the URL of a checksum file (as Ironic and ironic-python-agent take it, in
    image_checksum or image_os_hash_value), {"checksum_url": ..., "checksum_algo": ...}: the
    ramdisk reads that file right before the image."""
    algo, value = info.get("image_os_hash_algo"), info.get("image_os_hash_value")
    if algo and algo not in CHECKSUM_ALGOS:
        add("instance_info.image_os_hash_algo",
            f"{algo!r} is not one of {', '.join(CHECKSUM_ALGOS)}")
        return {}
    if value and is_url(value):
        return checksum_url(value, algo)
    if algo and value:
        return {"checksum": f"{algo}:{value}"}
    legacy = info.get("image_checksum")
    if legacy:
        if is_url(legacy):
            # Ironic: the digest's length says the algorithm, unless image_os_hash_algo does
            return checksum_url(legacy, algo)
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


def is_url(value):
    return str(value).startswith(("http://", "https://"))


def checksum_url(url, algo):
    return {"checksum_url": url, **({"checksum_algo": algo} if algo else {})}


# What Ironic's OCI resolution sets image_disk_format to when it cannot name a disk format.
OCI_FORMATS = {
    "unknown": "Ironic could not tell the OCI artifact's disk type (a reference by manifest "
               "digest carries none): reference it by tag with a 'disktype' annotation, or "
               "set image_disk_format to raw or qcow2 before the deploy",
    "bootc": "the OCI reference is a container image (bootc), not a disk image artifact: "
             "this deploy interface writes disk images only"}


def image(info, add, target, whole):
    uri = info.get("image_url") or info.get("image_source")
    if str(uri).startswith("oci://"):
        add("instance_info.image_source",
            f"{uri!r} has not been resolved: the deploy interface resolves an oci:// "
            "reference to its blob's URL (image_url) when it prepares the deploy")
        return None
    if local_paths.is_local(uri):
        add("instance_info.image_source", local_paths.refusal("image"))
        return None
    if not uri or not str(uri).startswith(("http://", "https://")):
        add("instance_info.image_source",
            f"{uri!r} is not an http(s) URL; the deploy interface passes a URL (image_url)")
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
    image.update(checksum(info, add))
    auth = info.get("image_request_authorization_secret")
    if auth and not (auth[0] != " " and all(" " <= c <= "~" for c in auth)):
        # named by Ironic's field, and never echoed: it is a credential
        add("instance_info.image_request_authorization_secret",
            "is not an HTTP header value (printable ASCII without a leading blank)")
    elif auth:
        # As ironic-python-agent gets it: the header for the image's own download.
        image["authorization"] = auth
    if local_paths.is_local(info.get("image_signature")):
        add("instance_info.image_signature", local_paths.refusal("signature"))
    elif info.get("image_signature"):
        image["signature"] = info["image_signature"]    # the native schema judges its form
    return image


def configdrive(value, add):
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
