"""/etc/fstab for the target, every device's entry by UUID (tmpfs, ramfs and bind mounts by
their spec)."""

from provision_agent.drivers import target


def line(uuid, entry):
    """uuid None: the entry's own spec (a tmpfs, ramfs or bind mount)."""
    return "\t".join([f"UUID={uuid}" if uuid else entry["spec"], entry["mount_point"],
                      entry["fs_type"],
                      entry["options"] or "defaults", str(entry["dump"]), str(entry["pass"])])


def render(entries_with_uuid):
    head = "# /etc/fstab: written by provision-agent; devices by UUID\n"
    return head + "".join(line(uuid, e) + "\n" for uuid, e in entries_with_uuid)


def write(root, text, name="etc/fstab"):
    return target.write_text(root, "/" + name, text)
