"""Where encryption goes in a plan: a volume on a partition, an array or a whole disk is made
and opened after the arrays and before LVM (a physical volume may stand on it); one on a
logical volume after LVM. The crypttab goes with fstab."""

from provision_agent import redact
from provision_agent.plan import steps as st

DHCP_ANY = "ip=::::::dhcp"      # ip=<client>:<server>:<gw>:<mask>:<host>:<device>:<autoconf>


def volumes(res, on_lvs):
    """Format and open steps of the volumes on logical volumes (on_lvs) or on anything else."""
    lvs = {lv.id for _, lv in res.layout.logical_volumes()}
    plain_root = _root_volume(res.layout) is None
    steps = []
    for e in res.layout.encrypted:
        if (e.device in lvs) != on_lvs:
            continue
        device = res.devices.get(e.device)
        if e.key_file and plain_root:
            # accepted only with allow_plain_root (validate_crypt): the plan says it, too
            res.warnings.append(f"{e.origin or e.id}: the key file of {e.name} is kept in "
                                f"clear on an unencrypted / (allow_plain_root)")
        steps.append(st.LuksFormat(
            device, e.name, e.cipher, e.key_size, list(res.layout.recovery_recipients),
            res.luks_sector_sizes.get(e.id, e.sector_size), clevis_config(e),
            e.key_file.uri if e.key_file else None,
            e.key_file.checksum if e.key_file else None, e.passphrase,
            description=f"LUKS2 on {device}, unlocked by {_unlock_text(e, plain_root)}, "
                        f"and a recovery key"))
        steps.append(st.LuksOpen(device, e.name, e.discard,
                                 description=f"open {device} as /dev/mapper/{e.name}"))
    return steps


def clevis_config(e):
    """clevis sss's config for e's tpm2 and tang methods; None for a key file or a passphrase
    alone."""
    if e.key_file or not e.methods():
        return None
    pins = {}
    if e.tpm2_pcrs is not None:
        pins["tpm2"] = {"pcr_bank": e.tpm2_bank, "pcr_ids": ",".join(map(str, e.tpm2_pcrs))}
    if e.tang:
        pins["tang"] = [{"url": t["url"], "thp": t["thumbprint"]} for t in e.tang]
    return {"t": e.threshold, "pins": pins}


def crypttab(res):
    layout = res.layout
    if not layout.encrypted:
        return []
    root = _root_volume(layout)
    entries = []
    for e in layout.encrypted:
        options = ["luks"] + (["discard"] if e.discard else [])
        if e.id == root:
            # Debian's cryptroot hook finds the root's volume by itself on a booted system;
            # in provision's chroot it may not, and this names it for certain
            options.append("initramfs")
        if e.tang and e.id != root:
            # opened after the network is up; the root's Tang is the initramfs's business
            options.append("_netdev")
        pins = (["key_file"] if e.key_file else
                (["tpm2"] if e.tpm2_pcrs is not None else []) + (["tang"] if e.tang else [])
                + (["passphrase"] if e.passphrase is not None else []))
        entries.append({"name": e.name, "device": res.devices.get(e.device),
                        "key_file": f"/etc/cryptsetup-keys.d/{e.name}.key" if e.key_file
                        else None, "options": ",".join(options), "unlock": pins,
                        "root": e.id == root})
    return [st.Crypttab(entries, description="write /etc/crypttab by LUKS UUID ("
                        + ", ".join(e["name"] for e in entries) + ")")]


def kernel_params(layout, params):
    """(the kernel parameters, what was added and why): a root that Tang unlocks needs the
    network in the initramfs, and clevis brings it up as `ip=` says; without one, DHCP on
    whichever interface answers. In the long form: Debian's clevis takes the sixth field of
    `ip=` for the interface to wait for, and `ip=dhcp` has it wait for one named "dhcp" and
    then give up on the network. An `ip=` of the operator's own is kept as it is."""
    root = _root_volume(layout)
    tang = any(e.id == root and e.tang for e in layout.encrypted)
    if not tang or any(p.startswith("ip=") for p in (params or "").split()):
        return params, ""
    return (f"{params} {DHCP_ANY}".strip(),
            f"; {DHCP_ANY} added: Tang unlocks / over the network")


def _root_volume(layout):
    """The id of the encrypted volume / stands on (directly or through LVM), or None."""
    root = next((fs.device for fs in layout.filesystems if fs.mount == "/"), None)
    crypts = {e.id for e in layout.encrypted}
    if root in crypts:
        return root
    for vg in layout.volume_groups:
        if any(lv.id == root for lv in vg.logical_volumes):
            return next((pv for pv in vg.pvs if pv in crypts), None)
    return None


def _unlock_text(e, plain_root=False):
    if e.key_file:
        return f"key file {redact.url(e.key_file.uri)}" + (
            " (kept in clear on an unencrypted /)" if plain_root else "")
    methods = ([f"TPM2 (PCRs {','.join(map(str, e.tpm2_pcrs))})"]
               if e.tpm2_pcrs is not None else [])
    methods += [f"Tang {redact.url(t['url'])}" for t in e.tang]
    # the passphrase itself is a credential: the plan says only that there is one
    typed = "a passphrase typed at the console"
    if not methods:
        return typed
    text = methods[0] if len(methods) == 1 else f"{e.threshold} of {', '.join(methods)}"
    return f"{text} or {typed}" if e.passphrase is not None else text
