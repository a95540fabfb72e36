"""Paths inside the target root, resolved as the installed system will resolve them.

An image is untrusted content: its /etc/fstab may be a link to an absolute path, its /srv a link
to /. Followed from the ramdisk, such links lead out of the target, onto the ramdisk's own files.
Every path provision writes to or mounts on goes through resolve(): each component's links are
followed the way a chroot would follow them (an absolute link starts again at the target root,
'..' stops at it), so the result is always inside the root and is what the installed system
sees at that path. The final open does not follow links (resolve() already did).

check_root() refuses a --target_root whose stale-mount cleanup could unmount the machine's own
filesystems: '/', a top-level directory, or a mount point that is not on a disk being provisioned.
"""

import errno
import os

from provision_agent.errors import EXIT_INVALID_INPUT, ProvisionError

MAX_LINKS = 40          # as the kernel's limit for one lookup


class TargetPathError(ProvisionError):
    exit_code = EXIT_INVALID_INPUT


def resolve(root, path):
    """The host path for `path` (absolute, in the target's terms) inside root."""
    root = os.path.realpath(root)
    todo = [c for c in path.split("/") if c not in ("", ".")]
    done = []                       # components below root, all real directories or leaves
    links = 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        here = os.path.join(root, *done, part)
        if os.path.islink(here):
            links += 1
            if links > MAX_LINKS:
                raise TargetPathError(f"{path}: more than {MAX_LINKS} symbolic links in the "
                                      f"target (a loop?)")
            target = os.readlink(here)
            if target.startswith("/"):
                done = []
            todo = [c for c in target.split("/") if c not in ("", ".")] + todo
            continue
        done.append(part)
    return os.path.join(root, *done)


def makedirs(root, path):
    where = resolve(root, path)
    os.makedirs(where, exist_ok=True)
    return where


def read_text(root, path):
    """The file's text, or "" when there is none."""
    try:
        fd = os.open(resolve(root, path), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return ""
    with os.fdopen(fd) as f:
        return f.read()


def write_text(root, path, text, mode=0o644):
    """Write a file at path inside root (parents made), replacing what is there."""
    return write_bytes(root, path, text.encode(), mode)


def write_bytes(root, path, data, mode=0o644):
    """write_text for bytes; mode applies to a file made here and to one replaced."""
    where = resolve(root, path)
    os.makedirs(os.path.dirname(where), exist_ok=True)
    try:
        fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:     # a link appeared after resolve(): never follow it
            raise TargetPathError(f"{path} in the target became a symbolic link") from None
        raise
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), mode)
        f.write(data)
    return where


def check_root_path(root):
    """The refusals of check_root that need neither a plan nor the machine's mounts: every
    command that plans (run, validate, the dry run) makes them before it reads its input."""
    real = os.path.realpath(root)
    if real == "/" or real.count("/") < 2:
        raise TargetPathError(f"--target_root {root} resolves to {real}: use a directory of "
                              f"its own such as /tmp/provision-target, never / or a top-level "
                              f"directory (the stale-mount cleanup unmounts everything below it)")
    if os.path.lexists(real) and not os.path.isdir(real):
        raise TargetPathError(f"--target_root {root} is not a directory")
    return real


def check_root(root, mount_sources, planned_disk_of):
    """Refuse a target root that provision must not clean up or mount under.

    mount_sources: {mount point: source device} of the machine; planned_disk_of(source) is
    True when the source lives on a disk this plan provisions (a mount left by an earlier run).
    """
    real = check_root_path(root)
    source = mount_sources.get(real)
    if source is not None and not planned_disk_of(source):
        raise TargetPathError(f"--target_root {root} is a mount point of {source}, which this "
                              f"plan does not provision: choose a directory of its own")
    return real
