"""The installed system's multipath: the WWIDs of the multipath disks it was installed on.

Debian and Ubuntu ship multipath-tools with find_multipaths "strict": only WWIDs listed in
/etc/multipath/wwids become multipath devices, at boot in the initramfs too (the
multipath-tools-boot hook copies the file in). Without the entry the system would boot from
one of the paths, behind multipathd's back. Lines the image already has are kept.

RHEL-family images ship device-mapper-multipath without /etc/multipath.conf, and without one
multipathd makes no device at all (it blacklists every disk until `mpathconf --enable` writes
the file). Such an image gets the file mpathconf would write: find_multipaths yes, which
also takes the WWIDs listed in the wwids file.
"""

import os

from provision_agent.drivers import target

WWIDS = "/etc/multipath/wwids"
HEADER = ("# Multipath wwids, Version : 1.0\n"
          "# NOTE: This file is maintained by multipath and multipathd; provision-agent added\n"
          "# the disks the system was installed on.\n"
          "#\n"
          "# Valid WWIDs:\n")


def merge_wwids(existing, wwids):
    """The wwids file's text with every wwid in it once (multipath's /WWID/ lines)."""
    text = existing if existing and existing.strip() else HEADER
    have = {ln.strip() for ln in text.splitlines()}
    if not text.endswith("\n"):
        text += "\n"
    for wwid in wwids:
        entry = f"/{wwid}/"
        if entry not in have:
            text += entry + "\n"
            have.add(entry)
    return text


def write_wwids(root, wwids):
    text = merge_wwids(target.read_text(root, WWIDS), wwids)
    target.write_text(root, WWIDS, text)
    return text


CONF = "/etc/multipath.conf"
# what `mpathconf --enable` writes when there is no file (device-mapper-multipath)
ENABLED_CONF = ("# written by provision-agent, as `mpathconf --enable` does\n"
                "defaults {\n\tuser_friendly_names yes\n\tfind_multipaths yes\n}\n")


def enable_conf(root):
    """Write CONF when the image has none; the path written, or None."""
    if os.path.lexists(target.resolve(root, CONF)):
        return None
    target.write_text(root, CONF, ENABLED_CONF)
    return CONF


def has_tools(root):
    """Whether the image ships multipath-tools; looked up as the target sees its own paths,
    so a link in the image never answers for the ramdisk's binary."""
    return any(os.path.exists(target.resolve(root, d + "/multipath"))
               for d in ("/usr/sbin", "/sbin"))
