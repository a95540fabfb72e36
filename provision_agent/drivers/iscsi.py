"""open-iscsi: the ramdisk logs in to the layout's LUNs, and the installed system gets what it
needs to log in at boot.

CHAP secrets never go on a command line (argv is world-readable in /proc): iscsiadm sets a
record's values only from `-v` arguments, so the record is made with `iscsiadm -o new` and its
`node.session.auth.*` lines are written into the record file here (mode 0600), where iscsiadm
reads them at login. Node records live under /etc/iscsi/nodes/TARGET/ADDRESS,PORT,TPGT/IFACE
(a directory per portal, a file per interface; older open-iscsi: a file per portal).
"""

import glob
import os
import shlex
import time

from provision_agent.drivers import target
from provision_agent.errors import CommandError, ImageError, MachineMismatch, Problem
from provision_agent.plan import iscsi as names
from provision_agent.plan.model import IscsiTarget

ETC = "/etc/iscsi"
LOGIN_TIMEOUT = 60          # iscsiadm's login, whatever its own retries
APPEAR_TIMEOUT = 60         # the LUN's by-path link after the login
READ_MAX = 64 * 1024        # a node record or the initiator name file
DEV = ""                    # where /dev is (tests put the by-path links elsewhere)
# iscsiadm's lock directory: it makes only the last level, and the ramdisk has no init system
# to make /run/lock
LOCK_DIR = "/run/lock/iscsi"
AUTH = ("node.session.auth.authmethod", "node.session.auth.username",
        "node.session.auth.password", "node.session.auth.username_in",
        "node.session.auth.password_in")
# What the installed system needs: (paths, one of which must exist, the Debian package).
TOOLS = (["/usr/sbin/iscsiadm", "/sbin/iscsiadm"], "open-iscsi")
INITRAMFS = (["/usr/share/initramfs-tools/hooks/iscsi", "/usr/lib/dracut/modules.d/95iscsi"],
             "open-iscsi")


def _write(path, text, mode):
    """A file of the ramdisk's own /etc/iscsi (never the target's: target.write_text)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read(READ_MAX)


def read_initiator(etc=ETC):
    """The InitiatorName of etc/initiatorname.iscsi, or None."""
    try:
        text = _read(os.path.join(etc, "initiatorname.iscsi"))
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        if line.strip().startswith("InitiatorName="):
            return line.split("=", 1)[1].strip() or None
    return None


def ensure_initiator(runner, name=None, etc=ETC):
    """This machine's initiator name: the layout's, else the one the ramdisk has, else a new
    one from iscsi-iname; written where iscsid reads it."""
    name = name or read_initiator(etc)
    if not name:
        name = runner.run(["iscsi-iname"], timeout=30).stdout.strip()
    _write(os.path.join(etc, "initiatorname.iscsi"), f"InitiatorName={name}\n", 0o644)
    return name


def record_files(t, etc=ETC):
    """The node record files of a target's portal (one per interface)."""
    address, port = names.parse_portal(t.portal)
    base = os.path.join(etc, "nodes", glob.escape(t.target), glob.escape(f"{address},{port}"))
    found = []
    for path in sorted(glob.glob(base + ",*") + glob.glob(base)):
        found += sorted(p for p in glob.glob(os.path.join(glob.escape(path), "*"))
                        if os.path.isfile(p)) if os.path.isdir(path) else [path]
    return found


def auth_lines(t):
    """The record lines of a target's CHAP settings (secrets: written to files only)."""
    if not t.chap_username:
        return ["node.session.auth.authmethod = None"]
    lines = ["node.session.auth.authmethod = CHAP",
             f"node.session.auth.username = {t.chap_username}",
             f"node.session.auth.password = {t.chap_password}"]
    if t.mutual_username:
        lines += [f"node.session.auth.username_in = {t.mutual_username}",
                  f"node.session.auth.password_in = {t.mutual_password}"]
    return lines


def with_lines(text, lines, replaced):
    """A record's text with every line whose key is in `replaced` dropped and `lines` added."""
    kept = [ln for ln in text.splitlines()
            if ln.split("=", 1)[0].strip() not in replaced]
    return "\n".join(kept + lines) + "\n"


def _rewrite(path, lines, replaced):
    _write(path, with_lines(_read(path), lines, replaced), 0o600)


def login(runner, t, etc=ETC, timeout=APPEAR_TIMEOUT):
    """Log in to one LUN's target and wait for the LUN's by-path link; MachineMismatch (exit 3)
    naming the target and portal, never a secret, when either fails."""
    address, port = names.parse_portal(t.portal)
    portal = names.portal_text(address, port)
    node = ["iscsiadm", "-m", "node", "-T", t.target, "-p", portal]
    where = f"iSCSI target {t.target} at {portal}"
    try:
        # an earlier run's record is replaced (check=False: that one may already exist)
        runner.run(node + ["-o", "new"], check=False, timeout=30)
        files = record_files(t, etc)
        if not files:
            raise MachineMismatch([Problem(where, "iscsiadm made no node record under "
                                           f"{etc}/nodes")])
        for path in files:
            _rewrite(path, auth_lines(t), AUTH)
        runner.run(node + ["--login"], timeout=LOGIN_TIMEOUT,
                   ok_codes=(0, 15))   # 15: a session to it exists already (an earlier run)
    except CommandError as exc:
        raise MachineMismatch([Problem(where, f"cannot log in: {_reason(exc)[:300]}; check "
                                       "the portal, the target name, the network and CHAP")]) \
            from None
    return wait_for(runner, t, timeout)


def _reason(exc):
    """iscsiadm's reason for a failed login: its "initiator reported error (24 - iSCSI login
    failed due to authorization failure)" line, which its last line ("Could not log into all
    portals") does not say."""
    lines = [ln.strip() for ln in (exc.stderr or "").splitlines() if ln.strip()]
    said = [ln for ln in lines if "reported error" in ln]
    return (said or lines[-1:] or [str(exc.reason or "failed")])[-1]


def wait_for(runner, t, timeout=APPEAR_TIMEOUT):
    """The LUN's by-path link, once udev has made it."""
    links = names.by_path_links(t)
    deadline = time.monotonic() + timeout
    while True:
        runner.run(["udevadm", "settle", "--timeout=10"], check=False, timeout=30)
        for link in links:
            if os.path.exists(DEV + link):
                return link
        if time.monotonic() >= deadline:
            raise MachineMismatch([Problem(
                f"iSCSI target {t.target} at {t.portal}",
                f"logged in, but LUN {t.lun} did not appear within {timeout}s "
                f"({links[0]}): does the target export that LUN to this initiator?")])
        time.sleep(1)


def log_in_all(runner, layout, etc=ETC):
    """Before discovery: log in to every iSCSI disk of the layout; {disk id: by-path link}."""
    disks = [d for d in layout.disks if d.iscsi]
    if not disks:
        return {}
    # iscsid reads the name once, as it starts: without it, it logs in with none
    ensure_initiator(runner, next((d.iscsi.initiator for d in disks if d.iscsi.initiator),
                                  None), etc)
    start(runner)
    return {d.id: login(runner, d.iscsi, etc) for d in disks}


def start(runner):
    """The initiator's kernel module and iscsid (which may be running already)."""
    runner.run(["modprobe", "iscsi_tcp"], check=False, timeout=60)
    os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
    if runner.run(["pidof", "iscsid"], check=False, timeout=10).returncode != 0:
        runner.run(["iscsid"], timeout=30)


def missing_package(root, for_root):
    """The Debian package the image lacks to log in at boot (for / in the initramfs), or None."""
    for paths, package in [TOOLS] + ([INITRAMFS] if for_root else []):
        if not any(os.path.lexists(target.resolve(root, p)) for p in paths):
            return package
    return None


def install(root, args, etc=ETC):
    """The installed system's initiator name, node records (startup automatic) and, for / on
    iSCSI, /etc/iscsi/iscsi.initramfs. Returns the paths written (for the step's result)."""
    package = missing_package(root, bool(args["root"]))
    if package:
        raise ImageError(f"the image has no {package} (iscsiadm"
                         + (" and its initramfs hook" if args["root"] else "")
                         + "): the installed system could not log in to its iSCSI disks; "
                         f"use an image with {package} installed")
    initiator = args["initiator"] or read_initiator(etc)
    target.write_text(root, "/etc/iscsi/initiatorname.iscsi", f"InitiatorName={initiator}\n")
    written = ["/etc/iscsi/initiatorname.iscsi"]
    records = {}
    for entry in args["targets"]:
        t = IscsiTarget(portal=entry["portal"], target=entry["target"], lun=entry["lun"])
        for path in record_files(t, etc):
            text = with_lines(_read(path), ["node.startup = automatic",
                                            "node.conn[0].startup = automatic"],
                              ("node.startup", "node.conn[0].startup"))
            inside = "/etc/iscsi/" + os.path.relpath(path, etc)
            target.write_text(root, inside, text, 0o600)
            records[(entry["portal"], entry["target"])] = text
            written.append(inside)
    if args["root"]:
        text = initramfs_conf(args["root"], initiator,
                              records.get((args["root"]["portal"], args["root"]["target"]), ""))
        target.write_text(root, "/etc/iscsi/iscsi.initramfs", text, 0o600)
        written.append("/etc/iscsi/iscsi.initramfs")
    return written


def initramfs_conf(entry, initiator, record):
    """Debian open-iscsi's /etc/iscsi/iscsi.initramfs (sourced by its initramfs script) for
    the target / is on, its CHAP taken from the node record the ramdisk logged in with."""
    auth = {}
    for line in record.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in AUTH:
            auth[key.strip()] = value.strip()
    address, port = names.parse_portal(entry["portal"])
    values = [("ISCSI_INITIATOR", initiator), ("ISCSI_TARGET_NAME", entry["target"]),
              ("ISCSI_TARGET_IP", address), ("ISCSI_TARGET_PORT", str(port))]
    if auth.get("node.session.auth.authmethod") == "CHAP":
        values += [("ISCSI_USERNAME", auth.get("node.session.auth.username", "")),
                   ("ISCSI_PASSWORD", auth.get("node.session.auth.password", ""))]
        if auth.get("node.session.auth.username_in"):
            values += [("ISCSI_IN_USERNAME", auth["node.session.auth.username_in"]),
                       ("ISCSI_IN_PASSWORD", auth.get("node.session.auth.password_in", ""))]
    return ("# written by provision-agent: the initramfs logs in to the target / is on\n"
            + "".join(f"{k}={shlex.quote(v)}\n" for k, v in values))
