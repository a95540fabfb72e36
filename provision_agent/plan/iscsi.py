"""iSCSI disks in a layout: the portal, the target's name and the LUN, checked on their own,
and the by-path link udev gives the LUN once the ramdisk has logged in.

udev names an iSCSI LUN `/dev/disk/by-path/ip-ADDRESS:PORT-iscsi-TARGET-lun-N` from the
session's connection address, an IP address, never a host name: so a portal is an IPv4 or a
bracketed IPv6 literal. Patterns here are anchored and linear.
"""

import ipaddress
import re

from provision_agent.plan.model import IscsiTarget

DEFAULT_PORT = 3260
MAX_LUN = 16383          # SAM's flat LUN space (14 bits): what Linux's scsi layer and tgt use
MAX_NAME = 223           # RFC 3720: an iSCSI name is at most 223 bytes
# RFC 3720 3.2.6.3: iqn.YYYY-MM.reversed.domain[:anything]; eui. and naa. hex names. Names are
# compared in lower case (RFC 3722's stringprep): ASCII letters, digits, '-', '.', ':'.
_IQN = re.compile(r"iqn\.[0-9]{4}-(0[1-9]|1[0-2])\.[a-z0-9][a-z0-9.-]*(:[a-z0-9.:-]+)?")
_EUI = re.compile(r"eui\.[0-9a-f]{16}")
_NAA = re.compile(r"naa\.([0-9a-f]{16}|[0-9a-f]{32})")
_PORTAL = re.compile(r"(\[(?P<v6>[0-9a-fA-F:.]{2,45})\]|(?P<v4>[0-9.]{7,15}))"
                     r"(:(?P<port>[0-9]{1,5}))?")


def name_problem(name, what="target"):
    """Why `name` is no iSCSI name (None if it is one)."""
    if len(name) > MAX_NAME:
        return f"the {what} name is longer than {MAX_NAME} bytes"
    if name != name.lower():
        return f"the {what} name {name!r} has capitals: iSCSI names are lower case (RFC 3722)"
    if not (_IQN.fullmatch(name) or _EUI.fullmatch(name) or _NAA.fullmatch(name)):
        return (f"the {what} name {name!r} is not an iSCSI name: iqn.YYYY-MM.reversed.domain"
                "[:identifier], eui. and 16 hex digits, or naa. and 16 or 32 hex digits")
    return None


def parse_portal(text):
    """(address, port) of 'A.B.C.D[:PORT]' or '[IPv6][:PORT]'; ValueError saying why not."""
    m = _PORTAL.fullmatch(text)
    if not m:
        raise ValueError(f"portal {text!r} is not ADDRESS[:PORT] with an IPv4 address or a "
                         "bracketed IPv6 one ([fd00::1]:3260); a host name cannot be matched "
                         "to the disk udev names by the session's address")
    try:
        addr = ipaddress.ip_address(m.group("v6") or m.group("v4"))
    except ValueError:
        raise ValueError(f"portal {text!r}: {m.group('v6') or m.group('v4')!r} is not an IP "
                         "address") from None
    if m.group("v6") and addr.version != 6:
        raise ValueError(f"portal {text!r}: brackets are for IPv6 addresses")
    port = int(m.group("port")) if m.group("port") else DEFAULT_PORT
    if not 1 <= port <= 65535:
        raise ValueError(f"portal {text!r}: port {port} is not 1 to 65535")
    return str(addr), port


def portal_text(address, port):
    """The portal as iscsiadm's -p takes it."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def by_path_links(t):
    """The by-path links udev may give the LUN: IPv6 addresses are written by the kernel
    (libiscsi's persistent_address), which may spell them in full; both forms are tried."""
    address, port = parse_portal(t.portal)
    forms = [address]
    if ":" in address:
        full = ipaddress.IPv6Address(address).exploded
        forms += [full] if full != address else []
    return [f"/dev/disk/by-path/ip-{a}:{port}-iscsi-{t.target}-lun-{t.lun}" for a in forms]


def hints(t):
    """The match hints of an iSCSI disk: its by-path link (either spelling, for IPv6)."""
    links = by_path_links(t)
    return {"by_path": links[0] if len(links) == 1 else " ".join(f"<or> {x}" for x in links)}


def parse_uri(text):
    """curtin's disk path `iscsi:[user:password[:iuser:ipassword]@]host:proto:port:lun:target`
    (RFC 4173, with Debian's credentials) as the object form. host may be [IPv6]; proto is 6
    (TCP) or empty, port 3260 and lun 0 when empty. ValueError never quotes the credentials."""
    rest = text[len("iscsi:"):]
    creds, at, rest = rest.rpartition("@")       # a target name has no '@'
    if rest.startswith("["):
        close = rest.find("]")
        host, rest = rest[:close + 1], rest[close + 1:]
    else:
        host, _, rest = rest.partition(":")
        rest = ":" + rest
    fields = rest[1:].split(":", 3) if rest.startswith(":") else []
    if len(fields) != 4 or not host or not fields[3]:
        raise ValueError("curtin's iscsi: path is iscsi:[user:password[:iuser:ipassword]@]"
                         "host:proto:port:lun:targetname; host and targetname are needed")
    proto, port, lun, target = fields
    if proto not in ("", "6") or not (port + lun).isdigit() and (port or lun):
        raise ValueError("in curtin's iscsi: path, proto must be 6 (TCP) or empty, and port "
                         "and lun numbers")
    out = {"portal": f"{host}:{port or DEFAULT_PORT}", "target": target,
           "lun": int(lun) if lun else 0}
    words = creds.split(":") if at else []
    if len(words) not in (0, 2, 4) or any(not w for w in words):
        raise ValueError("in curtin's iscsi: path, credentials are user:password or "
                         "user:password:iuser:ipassword, each given")
    if words:
        out["chap"] = {"username": words[0], "password": words[1]}
    if len(words) == 4:
        out["chap_mutual"] = {"username": words[2], "password": words[3]}
    return out


def from_document(d):
    """An IscsiTarget from a schema-valid disks[].iscsi object."""
    chap, mutual = d.get("chap") or {}, d.get("chap_mutual") or {}
    return IscsiTarget(portal=d["portal"], target=d["target"], lun=d.get("lun", 0),
                       chap_username=chap.get("username"), chap_password=chap.get("password"),
                       mutual_username=mutual.get("username"),
                       mutual_password=mutual.get("password"), initiator=d.get("initiator"))


def check(layout):
    """Problems of the layout's iSCSI disks, each located at its field."""
    from provision_agent.errors import Problem
    out = []
    for disk in (d for d in layout.disks if d.iscsi):
        out += [Problem(f"{disk.origin}.iscsi.{name}", msg) for name, msg in problems(disk.iscsi)]
    initiators = sorted({d.iscsi.initiator for d in layout.disks
                         if d.iscsi and d.iscsi.initiator})
    if len(initiators) > 1:
        out.append(Problem("$.disks", "a machine has one initiator name; the iSCSI disks give "
                           f"{len(initiators)}: {', '.join(initiators)}"))
    seen = {}
    for disk in (d for d in layout.disks if d.iscsi):
        key = (disk.iscsi.portal, disk.iscsi.target, disk.iscsi.lun)
        if key in seen:
            out.append(Problem(f"{disk.origin}.iscsi", f"the same LUN as disk {seen[key]!r}"))
        seen.setdefault(key, disk.id)
    return out + _boot_problems(layout, Problem)


def _boot_problems(layout, Problem):
    """Firmware loads grub from a local disk, and Debian's initramfs logs in to one target."""
    from provision_agent.plan import boot_targets
    out = []
    by_id = {d.id: d for d in layout.disks}
    if layout.bootloader and layout.bootloader.type == "grub2":
        for ref in boot_targets.of(layout):
            if ref in by_id and by_id[ref].iscsi:
                out.append(Problem(layout.bootloader.origin, f"disk {ref!r} is an iSCSI disk: "
                                   "firmware loads grub from a local disk (booting from iSCSI "
                                   "firmware or iPXE is not supported); put the bootloader "
                                   "and /boot on a local disk"))
    root = next((fs for fs in layout.filesystems if fs.mount == "/"), None)
    if root is not None:
        under = disks_under(layout, root.device)
        names = {(by_id[i].iscsi.portal, by_id[i].iscsi.target) for i in under
                 if by_id[i].iscsi}
        if len(names) > 1:
            out.append(Problem(root.origin, "/ stands on LUNs of several iSCSI targets; the "
                               "installed system's initramfs (Debian's open-iscsi) logs in to "
                               "one target at one portal"))
    return out


def problems(t):
    """[(field, message)] of one iSCSI disk's portal and names."""
    out = []
    try:
        parse_portal(t.portal)
    except ValueError as exc:
        out.append(("portal", str(exc)))
    why = name_problem(t.target)
    if why:
        out.append(("target", why))
    if t.initiator:
        why = name_problem(t.initiator, "initiator")
        if why:
            out.append(("initiator", why))
    if t.mutual_username and not t.chap_username:
        out.append(("chap_mutual", "mutual CHAP (the target proves itself) needs chap too"))
    return out


def disks_under(layout, device_id):
    """The ids of the disks a device (a partition, an array, a logical volume, an encrypted
    volume, a disk) stands on."""
    below = {p.id: [holder.id] for holder in layout.disks + layout.raids
             for p in holder.partitions}
    below.update({r.id: r.members + r.spares for r in layout.raids})
    below.update({lv.id: vg.pvs for vg, lv in layout.logical_volumes()})
    below.update({e.id: [e.device] for e in layout.encrypted})
    disks = {d.id for d in layout.disks}
    out, todo, seen = set(), [device_id], set()
    while todo:
        ref = todo.pop()
        if ref in seen:
            continue
        seen.add(ref)
        if ref in disks:
            out.add(ref)
        todo += below.get(ref, [])
    return out


def on_iscsi(layout, device_id):
    """Whether the device stands on an iSCSI disk."""
    iscsi_disks = {d.id for d in layout.disks if d.iscsi}
    return bool(iscsi_disks & disks_under(layout, device_id))


def root_target(layout):
    """The iSCSI disk `/` stands on (the installed system's initramfs logs in to it), or None.
    A root over several iSCSI disks is refused at validate (Debian's initramfs logs in to one
    target name)."""
    root = next((fs for fs in layout.filesystems if fs.mount == "/"), None)
    if root is None:
        return None
    under = [d for d in layout.disks if d.iscsi and d.id in disks_under(layout, root.device)]
    return under[0] if under else None


def entry(t):
    """A target as the plan shows it: no credentials, only whether CHAP is used."""
    address, port = parse_portal(t.portal)
    return {"portal": portal_text(address, port), "target": t.target, "lun": t.lun,
            "chap": bool(t.chap_username), "chap_mutual": bool(t.mutual_username)}
