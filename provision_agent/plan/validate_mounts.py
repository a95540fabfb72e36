"""Checks of what goes into fstab besides the layout's devices' filesystems (tmpfs, ramfs and
bind mounts), of the filesystem types Debian can make that provision's ramdisk cannot, and of
those it makes but cannot mount."""

from provision_agent.plan import model
from provision_agent.plan.validate_text import mount_point_problem


def _blank_or_control(text):
    return any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in text)


def check(layout, add, where):
    for fs in layout.filesystems:
        if fs.type in model.FS_TYPES_NOT_CARRIED:
            add(fs, f"filesystem type {fs.type!r}: {model.FS_TYPES_NOT_CARRIED[fs.type]}")
        elif fs.type in model.FS_TYPES_NOT_MOUNTED and fs.mount:
            add(fs, f"filesystem type {fs.type!r} is made but not mounted by provision: "
                    f"{model.FS_TYPES_NOT_MOUNTED[fs.type]}; leave its mount unset (the "
                    f"installed system can mount it: add its fstab line with ntfs-3g or "
                    f"ntfs3 in the image), or use ext4, xfs, btrfs or vfat")
    taken = {fs.mount: fs for fs in layout.filesystems if fs.mount}
    if layout.mounts and "/" not in taken:
        add(layout.mounts[0], "mounts are written to the fstab of the root filesystem the "
                              "layout makes, and no filesystem mounts at / (a whole-disk image "
                              "keeps its own fstab)")
    for m in layout.mounts:
        problem = mount_point_problem(m.mount)
        if problem:
            add(m, f"mount point {m.mount[:64]!r}: {problem}")
        elif m.mount == "/":
            add(m, f"/ is a filesystem on a device (filesystems), not a {m.type} mount")
        elif m.mount in taken:
            add(m, f"mount point {m.mount} is also used at {where(taken[m.mount])}")
        taken.setdefault(m.mount, m)
        if m.mount_options is not None and (not m.mount_options
                                            or _blank_or_control(m.mount_options)):
            add(m, "mount_options may not be empty or contain blanks or control characters "
                   "(they would split the fstab line)")
        _check_source(m, add)


def _check_source(m, add):
    if m.type != "bind":
        if m.source is not None:
            add(m, f"source is for bind mounts: a {m.type} mount has none")
        return
    if m.source is None:
        add(m, "a bind mount needs source: the directory of the installed system it shows "
               "again at mount")
        return
    problem = mount_point_problem(m.source)
    if problem:
        add(m, f"source {m.source[:64]!r}: {problem.replace('a mount point', 'a source')}")
    elif m.source == m.mount:
        add(m, f"a bind mount of {m.source} onto itself changes nothing: give another source")
