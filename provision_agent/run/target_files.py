"""The executor's handlers for the files a run writes into the installed system's /etc: fstab
(by filesystem UUID), mdadm.conf (the arrays and their member devices) and multipath's wwids;
and the check that the image assembles the bcache devices its fstab needs at boot.

Each goes into the target only when the run mounted the target's root filesystem (a warning
says so otherwise); fstab's and mdadm.conf's text is the step's result either way.
"""

import logging
import os

from provision_agent.drivers import (
    bcache,
    blockinfo,
    fstab,
    image_family,
    md,
    mount,
    target,
    udev,
)
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)


class TargetFiles:
    def __init__(self, runner, target_root, mounts):
        self.runner = runner
        self.root = target_root
        self.mounts = mounts

    def root_mounted(self, what):
        if mount.target_path(self.root, "/").rstrip("/") in [p.rstrip("/")
                                                             for p in self.mounts.stack]:
            return True
        LOG.warning("no root filesystem mounted under %s: %s not written", self.root, what)
        return False

    def fstab(self, step):
        entries = []
        for entry in step.entries:
            if "spec" in entry:         # tmpfs, ramfs, bind: no device
                entries.append((None, entry))
                continue
            uuid = blockinfo.uuid(self.runner, entry["device"])
            if not uuid:
                raise udev.DeviceMissing(f"{entry['device']} has no filesystem UUID for fstab")
            entries.append((uuid, entry))
        text = fstab.render(entries)
        relabel = False
        if self.root_mounted("/etc/fstab"):
            fstab.write(self.root, text)
            relabel = self._relabel()
            # the image may lack them: a mount point or bind source missing at boot would
            # stop the boot in emergency mode
            for directory in (d for _, e in entries for d in e.get("make_dirs", [])):
                if not os.path.exists(target.resolve(self.root, directory)):  # a file binds too
                    target.makedirs(self.root, directory)
        return {"fstab": text, **({"autorelabel": True} if relabel else {})}

    def _relabel(self):
        """/.autorelabel when the image runs SELinux enforcing: the files this run writes into
        it (fstab, crypttab, mdadm.conf, the boot entries) carry no label, and an enforcing
        system would deny its own services reading them. The image's selinux-autorelabel
        relabels the whole filesystem on the first boot, then reboots once."""
        if not image_family.selinux_enforcing(self.root):
            return False
        target.write_text(self.root, "/.autorelabel", "")
        LOG.info("SELinux is enforcing in the image: /.autorelabel written, the first boot "
                 "relabels the filesystem and reboots once")
        return True

    def mdadm_conf(self, step):
        lines = md.device_lines(self.runner, step.device_members or []) + \
            md.conf_lines(self.runner, step.arrays)
        text = ("# written by provision-agent\nHOMEHOST <ignore>\nMAILADDR root\n"
                + "".join(line + "\n" for line in lines))
        if not self.root_mounted("mdadm.conf"):
            return {"mdadm_conf": text}
        # where the image's family reads it: /etc/mdadm.conf (RHEL), /etc/mdadm/mdadm.conf
        path = image_family.mdadm_conf_path(image_family.detect(self.root))
        fstab.write(self.root, text, path.lstrip("/"))
        return {"mdadm_conf": text, "path": path}

    def multipath_conf(self, step):
        if not self.root_mounted("/etc/multipath/wwids"):
            return None
        from provision_agent.drivers import multipath
        text = multipath.write_wwids(self.root, step.wwids)
        if not multipath.has_tools(self.root):
            LOG.warning("the image has no multipath-tools: the installed system will use one "
                        "path of %s, not the multipath device", ", ".join(step.wwids))
            return {"wwids": text}
        conf = image_family.detect(self.root).rhel and multipath.enable_conf(self.root)
        return {"wwids": text, **({"conf": conf} if conf else {})}

    def iscsi_conf(self, step):
        """The node records (with their CHAP secrets) are copied from the ramdisk's, so the
        secrets never pass through the plan; the result lists only the paths written."""
        if not self.root_mounted("/etc/iscsi"):
            return None
        from provision_agent.drivers import iscsi
        return {"written": iscsi.install(self.root, step.args)}

    def bcache_boot(self, step):
        """exit 5, naming the package, when the image cannot assemble the bcache devices its
        fstab mounts: the boot would stop in emergency mode, waiting for them."""
        if not self.root_mounted("the bcache check"):
            return None
        missing = bcache.has_boot_support(
            lambda path: os.path.lexists(target.resolve(self.root, path)))
        if missing:
            raise ImageError(f"the image cannot assemble {', '.join(step.devices)} at boot "
                             f"(its fstab mounts filesystems on them): install "
                             f"{', '.join(missing)} in it (Debian package name; its udev rule "
                             f"registers bcache devices, its initramfs hook carries the rule)")
        return {"bcache_tools": True}
