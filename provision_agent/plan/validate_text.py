"""Checks of the text that ends up in the target's files and on command lines.

The schema checks shapes; these check what a shape cannot: a mount point that leaves the target
or names one directory two ways, a blank that splits an fstab line, a control character that
only fails inside a tool, a kernel parameter that grub or the shell reads as syntax, a name that
LVM or vfat refuse. Each is refused before the first write, with its place.
"""

import posixpath

from provision_agent.plan import urls

# Names LVM keeps for itself (lvm(8), "VALID NAMES"); a VG named "mapper" clashes with
# /dev/mapper, where LVM puts its devices.
LV_RESERVED_PREFIXES = ("snapshot", "pvmove")
LV_RESERVED_PARTS = ("_cdata", "_cmeta", "_corig", "_iorig", "_mlog", "_mimage", "_pmspare",
                     "_rimage", "_rmeta", "_tdata", "_tmeta", "_vdata", "_vorigin", "_wcorig")
VG_RESERVED = (".", "..", "mapper")
VFAT_FORBIDDEN = set('*?.,;:/\\|+=<>[]"')
# Outside double quotes, a kernel parameter is one grub word made of these; inside them, the
# characters grub's and the shell's double quotes would interpret are refused.
PARAM_WORD = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                 "_.,:=/+@%!~^-")
QUOTED_FORBIDDEN = set('$`\\')


def _control(text):
    return any(ord(c) < 32 or ord(c) == 127 for c in text)


def mount_point_problem(mount):
    """Why mount is not a normalised absolute path inside the target, or None."""
    if _control(mount) or any(c.isspace() for c in mount):
        return "a mount point may not contain blanks or control characters"
    if not mount.startswith("/"):
        return "a mount point is an absolute path"
    parts = mount.split("/")[1:]
    if ".." in parts:
        return "a mount point may not contain '..' (it would leave the target)"
    normal = posixpath.normpath(mount)
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    if mount != normal:
        return f"write it as {normal} (one spelling per directory)"
    return None


def kernel_params_problem(params):
    if _control(params):
        return "kernel parameters may not contain control characters"
    quoted = False
    for c in params:
        if c == '"':
            quoted = not quoted
        elif quoted and c in QUOTED_FORBIDDEN:
            return f"{c!r} inside double quotes is read by grub and the shell; leave it out"
        elif not quoted and not c.isspace() and c not in PARAM_WORD:
            return (f"{c!r} outside double quotes is syntax to grub or the shell; quote the "
                    f"value (name=\"...\") or leave it out")
    if quoted:
        return "a double quote is not closed"
    return None


def label_problem(fs_type, label):
    if _control(label):
        return "a label may not contain control characters"
    if fs_type == "vfat":
        bad = sorted(set(label) & VFAT_FORBIDDEN) + [c for c in label if ord(c) > 127][:1]
        if bad:
            return f"vfat labels may not contain {' '.join(bad)}"
    return None


def lv_name_problem(name):
    if name in (".", "..") or name.startswith(LV_RESERVED_PREFIXES):
        return f"LVM reserves {name!r} (names starting with snapshot or pvmove, . and ..)"
    for part in LV_RESERVED_PARTS:
        if part in name:
            return f"LVM reserves names containing {part!r} for its internal volumes"
    return None


def vg_name_problem(name):
    if name in VG_RESERVED:
        return f"{name!r} cannot name a volume group (it clashes under /dev)"
    return None


def check(layout, add):
    """Add every problem of layout's text through add(obj, message)."""
    for fs in layout.filesystems:
        if fs.mount:
            problem = mount_point_problem(fs.mount)
            if problem:
                add(fs, f"mount point {fs.mount[:64]!r}: {problem}")
        if fs.mount_options and (_control(fs.mount_options)
                                 or any(c.isspace() for c in fs.mount_options)):
            add(fs, "mount_options may not contain blanks or control characters (they would "
                    "split the fstab line)")
        if fs.label:
            problem = label_problem(fs.type, fs.label)
            if problem:
                add(fs, problem)
        for option in fs.mkfs_options:
            if _control(option):
                add(fs, "mkfs_options may not contain control characters")
    for _, part in layout.partitions():
        if part.name and _control(part.name):
            add(part, "a partition name may not contain control characters")
    for vg in layout.volume_groups:
        problem = vg_name_problem(vg.name)
        if problem:
            add(vg, problem)
        for lv in vg.logical_volumes:
            problem = lv_name_problem(lv.name)
            if problem:
                add(lv, problem)
    bl = layout.bootloader
    if bl and bl.kernel_params:
        problem = kernel_params_problem(bl.kernel_params)
        if problem:
            add(bl, f"kernel_params: {problem}")
    for im in layout.images:
        if _control(im.uri) or (im.target and _control(im.target)):
            add(im, "an image's uri and target may not contain control characters")
    check_urls(layout, add)


def check_urls(layout, add):
    """The host of every URL the run fetches from: a malformed IPv6 (or IPv4) literal is
    refused with its field, before anything is written (plan/urls.py)."""
    def url(obj, field, value):
        problem = urls.host_problem(value)
        if problem:
            add(obj, f"{field}: {problem}")

    for im in layout.images:
        url(im, "uri", im.uri)
        url(im, "checksum_url", im.checksum_url)
        url(im, "signature", im.signature if (im.signature or "").startswith("http") else None)
    for enc in layout.encrypted:
        if enc.key_file:
            url(enc, "unlock.key_file.uri", enc.key_file.uri)
        for i, server in enumerate(enc.tang):
            url(enc, f"unlock.tang[{i}].url", (server or {}).get("url"))
    cd = layout.configdrive
    if cd and cd.content and cd.content.startswith(("http://", "https://")):
        url(cd, "configdrive URL", cd.content)
