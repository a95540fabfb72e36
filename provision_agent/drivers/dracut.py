"""dracut images: what the installed system's initramfs must bring up before / (read from the
devices / stands on), the dracut modules that do it, the kernel command line that lets them,
and the rebuild with the image's own dracut.

dracut (since 024) assembles nothing by itself: without rd.auto, an md array is assembled
only when rd.md.uuid names it, LVM activated only for rd.lvm.lv/rd.lvm.vg, LUKS opened for
rd.luks.uuid (its parse-md.sh and parse-lvm.sh drop the udev rules otherwise). A host-only
initramfs carries those words itself (dracut writes them into it for the devices it found);
a generic one, or one rebuilt where dracut saw other devices, relies on the command line. So
they go on the command line, as Anaconda writes them and ironic-python-agent adds rd.md.uuid
for an image with dracut on software RAID.
"""

import json
import logging
import os
import re

from provision_agent.drivers import target
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

MODULE_DIRS = ("/usr/lib/dracut/modules.d", "/lib/dracut/modules.d")
# dracut's module for each kind of device lsblk shows under /, and the package that brings it
# (RHEL-family names; Debian's are mdadm, lvm2, cryptsetup, multipath-tools)
PACKAGES = {"mdraid": "mdadm", "lvm": "lvm2", "crypt": "cryptsetup",
            "multipath": "device-mapper-multipath"}
MAX_NODES = 256
UDEV_DIRS = ("/usr/lib/udev", "/lib/udev")
# The image's udev rules of multipath-tools and kpartx, and the programs they call that the
# multipath module does not install itself. dracut 059's module installs those rules by the
# names RHEL's packages give them (40-, 56-, 62-, 65-multipath.rules, 66-kpartx.rules,
# 11-dm-mpath.rules, ...); Debian's ship 60-multipath.rules, 60-kpartx.rules,
# 56-dm-mpath.rules, 56-dm-parts.rules and 68-del-part-nodes.rules, so none reached a Debian
# image's initramfs: no rule marked the paths as the map's members nor made the map's
# partitions, and / on them was never found. Installed by name with --install (on RHEL the
# same files again, which changes nothing).
MULTIPATH_RULES = re.compile(r"[0-9]{2}-(multipath|kpartx|dm-mpath|dm-parts|del-part-nodes)"
                             r"\.rules")
MULTIPATH_HELPERS = ("/usr/lib/udev/kpartx_id", "/lib/udev/kpartx_id", "/usr/bin/partx",
                     "/usr/sbin/partx")
# multipathd's path checkers and prioritizers (libchecktur.so, ...): the module looks for them
# under the library directories (/usr/lib64/multipath on RHEL), Debian keeps them in
# /usr/lib/multipath, and without them multipathd stops at start ("Checker 'tur' not found in
# /lib/multipath": the dracut test OS's boot, 2026-11-29).
MULTIPATH_PLUGIN_DIRS = ("/usr/lib/multipath", "/lib/multipath")
# dracut 059's multipath module enables multipathd.socket in the initramfs (its commit 02e646f;
# 060 disables it again: dracut issues 2175, 2289). multipathd.service conflicts with
# initrd-cleanup.service, so initrd-parse-etc stops it; then the cleanup hook's
# `multipath -l -v1` connects to the socket, systemd starts multipathd again, and that start
# cancels the queued initrd-cleanup: no switch root, the boot waits for ever after
# dracut-pre-pivot (the dracut test OS's boot, Debian 12's dracut 059-4, 2026-11-29). The
# socket is masked in the initramfs (a link to /dev/null, as `systemctl mask` makes it): the
# daemon is still started by its own enabled service and opens the socket itself. The link is
# made in the target's /run, the chroot's own tmpfs (drivers/chroot.py), so nothing of it
# stays in the image; dracut --include copies it into the initramfs' /etc/systemd/system.
INITRD_MASKED_UNITS = ("multipathd.socket",)
INITRD_MASK_DIR = "/run/provision-agent-dracut/units"
INITRD_UNIT_DIR = "/etc/systemd/system"


def _nodes(tree):
    """Every device of lsblk's inverse tree, / first, then what it stands on."""
    found, todo = [], list(tree.get("blockdevices") or [])
    while todo and len(found) < MAX_NODES:
        node = todo.pop(0)
        found.append(node)
        todo += node.get("children") or []
    return found


def root_stack(runner, root):
    """The devices the target's / stands on (itself first), as lsblk --inverse shows them."""
    res = runner.run(["findmnt", "-n", "-o", "SOURCE", "--target", root], check=False)
    source = res.stdout.strip()
    if not source:
        return []
    res = runner.run(["lsblk", "--json", "--inverse", "-o", "PATH,TYPE,FSTYPE,UUID", source],
                     check=False)
    try:
        return _nodes(json.loads(res.stdout or "{}"))
    except ValueError:
        LOG.warning("dracut: lsblk gave no readable tree for %s", source)
        return []


def _lv_name(runner, path):
    res = runner.run(["lvs", "--noheadings", "--separator", "/", "-o", "vg_name,lv_name", path],
                     check=False)
    name = res.stdout.strip()
    return name if name.count("/") == 1 and " " not in name else None


def needs(runner, nodes):
    """(dracut modules, kernel command line words) for the devices / stands on."""
    modules, words = [], []
    for node in nodes:
        kind, fs_type, uuid = (node.get(k) or "" for k in ("type", "fstype", "uuid"))
        if kind.startswith("raid") or fs_type == "linux_raid_member":
            modules.append("mdraid")
        if fs_type == "linux_raid_member" and uuid:
            words.append(f"rd.md.uuid={uuid}")
        if kind == "lvm":
            modules.append("lvm")
            name = _lv_name(runner, node.get("path") or "")
            if name:
                words.append(f"rd.lvm.lv={name}")
        if kind == "crypt" or fs_type == "crypto_LUKS":
            modules.append("crypt")
        if fs_type == "crypto_LUKS" and uuid:
            words.append(f"rd.luks.uuid={uuid}")
        if kind == "mpath":
            modules.append("multipath")
    return [m for m in PACKAGES if m in modules], list(dict.fromkeys(words))


def module_present(root, module):
    """Whether the image's dracut has module (a modules.d/NNname directory)."""
    for base in MODULE_DIRS:
        try:
            names = os.listdir(target.resolve(root, base))[:1024]
        except OSError:
            continue
        if any(n.lstrip("0123456789") == module for n in names):
            return True
    return False


def _sorted_names(root, path, most):
    """The first `most` names, sorted, in the target's directory `path`; none if it is not
    there."""
    try:
        return sorted(os.listdir(target.resolve(root, path)))[:most]
    except OSError:
        return []


def multipath_files(root):
    """The image's multipath udev rules, their helper programs and multipathd's plug-ins
    (MULTIPATH_RULES, MULTIPATH_PLUGIN_DIRS), each once (a merged-/usr image shows them under
    /lib too), in the target's terms."""
    found, seen = [], set()
    for base in UDEV_DIRS:
        found += [f"{base}/rules.d/{n}" for n in _sorted_names(root, base + "/rules.d", 1024)
                  if MULTIPATH_RULES.fullmatch(n)]
    found += [p for p in MULTIPATH_HELPERS if os.path.isfile(target.resolve(root, p))]
    for base in MULTIPATH_PLUGIN_DIRS:
        found += [f"{base}/{n}" for n in _sorted_names(root, base, 256) if n.endswith(".so")]
    unique = []
    for path in found:
        real = os.path.realpath(target.resolve(root, path))
        if real not in seen:
            seen.add(real)
            unique.append(path)
    return unique


def masked_units(root):
    """INITRD_MASKED_UNITS as links to /dev/null in the target's INITRD_MASK_DIR; dracut's
    arguments that put them into the initramfs."""
    where = target.makedirs(root, INITRD_MASK_DIR)
    for unit in INITRD_MASKED_UNITS:
        link = os.path.join(where, unit)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink("/dev/null", link)
    return ["--include", INITRD_MASK_DIR, INITRD_UNIT_DIR]


def argv(version, modules, install=(), include=()):
    """The image's dracut for one kernel (None: every installed one), with the modules the
    layout needs added (and the files they need that the image's modules leave out:
    multipath_files; include: dracut's --include arguments, masked_units)."""
    add = ["--add", " ".join(modules)] if modules else []
    files = ["--install", " ".join(install)] if install else []
    which = ["--kver", version] if version else ["--regenerate-all"]
    return ["dracut", "--force", *add, *files, *include, *which]


def rebuild(chroot, versions, modules, timeout):
    """One initramfs per kernel version, each with modules; exit 5 naming the package when
    the image's dracut lacks one (the system would not find its root)."""
    lacking = [m for m in modules if not module_present(chroot.root, m)]
    if lacking:
        raise ImageError(f"the image's dracut has no {', '.join(lacking)} module, which / "
                         f"needs to be found at boot: install "
                         f"{', '.join(PACKAGES.get(m, m) for m in lacking)} in the image")
    install, include = [], []
    if "multipath" in modules:
        install = multipath_files(chroot.root)
        include = masked_units(chroot.root)
        LOG.info("dracut: the image's multipath udev rules and helpers installed by name: %s; "
                 "masked in the initramfs: %s", " ".join(install) or "none",
                 " ".join(INITRD_MASKED_UNITS))
    if not versions:
        LOG.info("dracut: no kernel found in /boot; every installed kernel regenerated")
        return [chroot.run(argv(None, modules, install, include), timeout=timeout)]
    return [chroot.run(argv(v, modules, install, include), timeout=timeout) for v in versions]
