"""Checks of the encryption layer (model.Encrypted) on its own, before anything is written:
what the installed system could not open by itself, or could not boot from, is refused here.

Where encryption may sit: on a partition, an array, a logical volume or a whole disk. Not on
a RAID member (encrypt the array: one key, one header, one unlock at boot, and md resyncs
ciphertext the same), not on another encrypted volume. A volume group is all encrypted or
all plain: a logical volume may span its physical volumes, and a plain one would hold part
of it in the clear.
"""

from collections import Counter

from provision_agent.errors import Problem

# Bootloaders read these before anything unlocks; grub reads LUKS1 only, and no firmware
# reads LUKS at all.
BOOT_MOUNTS = ("/boot", "/boot/efi")


def _where(obj):
    return obj.origin or getattr(obj, "id", "?")


def check(layout):
    """Problems of layout.encrypted and of what stands on it; [] when there is none."""
    if not layout.encrypted:
        return []
    problems = []
    add = lambda obj, msg: problems.append(Problem(_where(obj), msg))  # noqa: E731
    crypts = {e.id: e for e in layout.encrypted}
    names = Counter(e.name for e in layout.encrypted)
    for e in layout.encrypted:
        if names[e.name] > 1:
            add(e, f"duplicate mapper name {e.name!r}")
        if e.device in crypts:
            add(e, f"device {e.device!r} is encrypted already; encrypt what holds the data "
                   "once")
        _check_unlock(e, add)
    for r in layout.raids:
        for ref in sorted(set(r.members + r.spares) & set(crypts)):
            add(r, f"member {ref!r} is an encrypted volume: encrypt the array instead (one "
                   "key and one unlock at boot, and md resyncs the ciphertext all the same)")
    under = _encrypted_under(layout, crypts, add)
    _check_boot(layout, under, add)
    _check_key_files(layout, under, add)
    if not layout.recovery_recipients:
        problems.append(Problem("$.recovery", "encrypted volumes need recovery.age_recipients: "
                                "each volume gets a recovery key, and it leaves the machine "
                                "only encrypted to them"))
    return problems


def _check_unlock(e, add):
    methods = e.methods()
    if e.key_file:
        if methods:
            add(e, "unlock: a key file opens the volume on its own; bind tpm2 or tang to the "
                   "volume the key file lives on instead")
        if e.passphrase is not None:
            add(e, "unlock: a key file opens the volume on its own, so its passphrase would "
                   "never be asked for; the recovery key is there for when the key file is "
                   "lost: give key_file or passphrase")
        if e.threshold != 1:
            add(e, "unlock: threshold counts tpm2 and tang methods; a key file has none")
        return
    if not methods and e.passphrase is None:
        add(e, "unlock needs tpm2, tang, key_file or passphrase: the installed system has to "
               "open the volume by itself, or ask for its passphrase at the console")
    elif not methods and e.threshold != 1:
        add(e, "unlock: threshold counts tpm2 and tang methods; a passphrase alone has none")
    elif methods and e.threshold > methods:
        add(e, f"unlock: threshold {e.threshold} but only {methods} method(s) (tpm2 counts "
               f"one, each tang server one)")


def _encrypted_under(layout, crypts, add):
    """{device id: the Encrypted below it} for every device that holds data only through an
    encrypted volume: the volume itself, and the volume groups and logical volumes on it."""
    under = dict(crypts)
    for vg in layout.volume_groups:
        below = [crypts[pv] for pv in vg.pvs if pv in crypts]
        if below and len(below) != len(vg.pvs):
            plain = [pv for pv in vg.pvs if pv not in crypts]
            add(vg, f"physical volumes {', '.join(map(repr, plain))} are not encrypted and "
                    f"the others are: a logical volume may span them, and part of it would "
                    f"be in the clear; encrypt all of them or none")
        if below:
            under[vg.id] = below[0]
            under.update({lv.id: below[0] for lv in vg.logical_volumes})
    return under


def _check_boot(layout, under, add):
    mounts = {fs.mount: fs for fs in layout.filesystems if fs.mount}
    for mount in BOOT_MOUNTS:
        fs = mounts.get(mount)
        if fs and fs.device in under:
            add(fs, f"{mount} is on encrypted volume {under[fs.device].id!r}: the bootloader "
                    f"reads it before anything is unlocked; keep {mount} on a plain "
                    f"partition or array")
    bl = layout.bootloader
    root = mounts.get("/")
    if root and root.device in under:
        crypt = under[root.device]
        if crypt.key_file:
            add(crypt, "the root filesystem's volume cannot be opened by a key file: the key "
                       "would live on the volume it opens; use tpm2, tang or a passphrase")
        if bl and bl.type == "grub2" and "/boot" not in mounts:
            add(root, "/ is encrypted and there is no /boot: the bootloader needs the kernel "
                      "and initramfs on a plain filesystem; add a /boot partition")
    parts = {p.id: p for _, p in layout.partitions()}
    for e in layout.encrypted:
        part = parts.get(e.device)
        if part and part.type in ("bios_grub", "esp"):
            add(e, f"partition {e.device!r} is a {part.type} partition, which firmware "
                   "reads in the clear")


def _check_key_files(layout, under, add):
    """A key file is copied to /etc/cryptsetup-keys.d on the installed root. On a root that is
    not encrypted (a plain filesystem, or a whole-disk image's own) it sits in clear beside
    what it opens: whoever has the disks, or the machine, reads the key and then the volume,
    which is what an operator asking for an encrypted volume means to prevent. Refused, not
    warned about: a warning in a plan or a log nobody reads would leave the data as readable
    as a plain volume while the layout says "encrypted". The key in clear still has uses an
    operator may mean (a data disk that leaves the machine, e.g. for repair, without the disk
    / is on; a volume kept only so that cleaning can crypto-erase it in an instant), so
    `allow_plain_root` accepts it, and the plan then says where the key is."""
    root = next((fs for fs in layout.filesystems if fs.mount == "/"), None)
    if root is not None and root.device in under:
        return
    for e in layout.encrypted:
        if e.key_file and not e.key_file.allow_plain_root:
            add(e, f"unlock.key_file: the key would be stored in clear at "
                   f"/etc/cryptsetup-keys.d/{e.name}.key on the installed root, and / is not "
                   f"encrypted, so whoever has the disks reads the key and the volume; encrypt "
                   f"/ (tpm2, tang or a passphrase), unlock this volume by tpm2, tang or a "
                   f"passphrase, or, if the key in "
                   f"clear is meant (the volume's disk may leave without the one / is on, or "
                   f"it is there for a crypto-erase), set "
                   f"unlock.key_file.allow_plain_root: true")
