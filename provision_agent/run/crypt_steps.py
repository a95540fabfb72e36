"""The executor's handlers for the encryption steps (plan/steps_crypt.py), and what they keep
from one step to the next: each open volume's key file and each volume's recovery key, which
leaves the machine only as age ciphertext (report["recovery_keys"]).

A volume that clevis or a passphrase unlocks keeps the key it was made with only until its
crypttab is written: then that keyslot is destroyed and the file wiped, and the volume opens
by its clevis binding, its passphrase or its recovery key alone. The passphrase reaches
cryptsetup as a file of the private tmpfs (luks.KEY_DIR), wiped as soon as its keyslot is
made: never an argument, stdin or a log line.
"""

import hashlib
import hmac
import json
import logging
import os

from provision_agent import redact
from provision_agent.drivers import image_family, luks, target
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

KEY_FILE_MAX = 64 * 1024
KEYS_IN_TARGET = "/etc/cryptsetup-keys.d"

# What the installed system needs to open a volume by itself: (paths, one of which must
# exist in the image, the Debian package that brings them, the RHEL family's).
NEEDS = {
    "luks": ((["/usr/sbin/cryptsetup", "/sbin/cryptsetup"], "cryptsetup-bin", "cryptsetup"),),
    "root": ((["/usr/share/initramfs-tools/hooks/cryptroot", "/usr/lib/dracut/modules.d/90crypt"],
              "cryptsetup-initramfs", "dracut"),),
    "clevis": ((["/usr/bin/clevis-luks-unlock"], "clevis-luks", "clevis-luks"),),
    # clevis-dracut names its module 60clevis (RHEL, Fedora)
    "clevis_root": ((["/usr/share/initramfs-tools/hooks/clevis",
                      "/usr/lib/dracut/modules.d/50clevis", "/usr/lib/dracut/modules.d/60clevis"],
                     "clevis-initramfs", "clevis-dracut"),),
    "clevis_later": ((["/usr/lib/systemd/system/clevis-luks-askpass.path",
                       "/lib/systemd/system/clevis-luks-askpass.path"], "clevis-systemd",
                      "clevis-systemd"),),
    "tpm2": ((["/usr/bin/clevis-decrypt-tpm2"], "clevis-tpm2", "clevis"),),
    "tang": ((["/usr/bin/clevis-decrypt-tang"], "clevis", "clevis"),),
}


def missing_packages(root, entries):
    """Packages the image lacks for the crypttab entries (its family's names), in a stable
    order."""
    wanted = ["luks"]
    for e in entries:
        pins = [p for p in e["unlock"] if p not in ("key_file", "passphrase")]
        if e["root"]:
            wanted.append("root")
        if pins:
            wanted += ["clevis", "clevis_root" if e["root"] else "clevis_later"] + pins
    rhel = image_family.detect(root).rhel
    missing = []
    for need in dict.fromkeys(wanted):
        for paths, debian, el in NEEDS[need]:
            if not any(os.path.lexists(target.resolve(root, p)) for p in paths):
                missing.append(el if rhel else debian)
    return list(dict.fromkeys(missing))


class CryptSteps:
    def __init__(self, runner, root, options=None, key_base=luks.KEY_DIR, fetch=None):
        self.runner = runner
        self.root = root
        self.options = options or {}
        self.key_base = key_base
        self.fetch = fetch or _fetch_key
        self.keys = {}              # device -> the key file it opens with
        self.unbind = []            # (device, key file): keyslots to destroy at crypttab
        self.recovery_keys = []     # {name, device, luks_uuid, age}

    def luks_format(self, step):
        directory = luks.key_dir(self.key_base)
        if step.key_file:
            key = os.path.join(directory, f"{step.name}.key")
            self.fetch(step.key_file, step.key_checksum, key, self.options)
        else:
            key = luks.new_key(directory, step.name)
        luks.luks_format(self.runner, step.device, key, step.cipher, step.key_size,
                         step.sector_size)
        recovery, _phrase = luks.new_recovery(directory, step.name)
        try:
            luks.add_key(self.runner, step.device, key, recovery)
            sealed = luks.age_encrypt(self.runner, step.recovery_recipients, recovery)
        finally:
            luks.forget(recovery)
        if step.passphrase is not None:
            typed = luks.new_passphrase(directory, step.name, step.passphrase)
            try:
                luks.add_key(self.runner, step.device, key, typed)
            finally:
                luks.forget(typed)
        if step.clevis:
            luks.clevis_bind(self.runner, step.device, key,
                             json.dumps(step.clevis, sort_keys=True))
        if step.clevis or step.passphrase is not None:
            self.unbind.append((step.device, key))
        self.keys[step.device] = key
        uuid = luks.luks_uuid(self.runner, step.device)
        self.recovery_keys.append({"name": step.name, "device": step.device,
                                   "luks_uuid": uuid, "age": sealed})
        return {"luks_uuid": uuid}

    def luks_open(self, step):
        luks.luks_open(self.runner, step.device, step.name, self.keys[step.device],
                       step.discard)

    def crypttab(self, step):
        missing = missing_packages(self.root, step.entries)
        if missing:
            raise ImageError(f"the image cannot open its encrypted volumes by itself: install "
                             f"{', '.join(missing)} in it ("
                             f"{'RHEL' if image_family.detect(self.root).rhel else 'Debian'}"
                             " package names)")
        lines = []
        for e in step.entries:
            uuid = luks.luks_uuid(self.runner, e["device"])
            if e["key_file"]:
                with open(self.keys[e["device"]], "rb") as f:
                    target.write_bytes(self.root, e["key_file"], f.read(), mode=0o400)
            lines.append(luks.crypttab_line(e["name"], uuid, e["key_file"], e["options"]))
        target.write_text(self.root, "/etc/crypttab",
                          "# /etc/crypttab: written by provision-agent; devices by LUKS UUID\n"
                          + "".join(line + "\n" for line in lines))
        for device, key in self.unbind:
            luks.remove_key(self.runner, device, key)
            luks.forget(key)
        self.unbind = []


def _fetch_key(uri, checksum, path, options):
    """The key file at uri into path (root-only), checked against checksum ("algo:hex")."""
    shown = f"key file {redact.url(uri)}"
    if uri.startswith(("http://", "https://")):
        from provision_agent.drivers.images import checksum_file
        data = checksum_file.fetch(uri, what="key file", limit=KEY_FILE_MAX, text=False,
                                   tls_verify=not options.get("image_insecure"),
                                   ca_bundle=options.get("image_ca_bundle"))
    else:
        local = uri[len("file://"):] if uri.startswith("file://") else uri
        with open(local, "rb") as f:
            data = f.read(KEY_FILE_MAX + 1)
        if len(data) > KEY_FILE_MAX:
            raise ImageError(f"{shown}: larger than {KEY_FILE_MAX} bytes; that is not a key file")
    algo, _, want = checksum.partition(":")
    if not hmac.compare_digest(hashlib.new(algo, data).hexdigest(), want.lower()):
        raise ImageError(f"{shown}: its {algo} checksum is not the one given")
    luks.write_secret(path, data)
    LOG.info("%s: %d bytes, checksum verified", shown, len(data))
