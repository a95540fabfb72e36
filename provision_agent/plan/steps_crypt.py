"""The plan's encryption steps (model.Encrypted; the planner's order is in planner_crypt.py).

No step holds a key: the executor generates each volume's key in the ramdisk's private tmpfs
and wipes it when the volume is bound, or reads it from `key_file` (a URL, shown in a plan
only redacted) after checking `key_checksum`. A `passphrase` the operator chose is the one
credential a step carries: every plan shows it as "<redacted>" (redact.SECRET_KEYS) and
repr() leaves it out. The recovery key is generated the same way and
leaves the machine only encrypted to `recovery_recipients` (age public keys).
"""

from dataclasses import dataclass, field
from typing import ClassVar

from provision_agent.plan.step_base import OPTIONAL, Step


@dataclass
class LuksFormat(Step):
    """LUKS2 on `device`; a recovery key in a keyslot of its own; then, unless a key file
    opens it, the clevis binding `clevis` (clevis sss's own config: {"t": N, "pins": {...}})
    and/or `passphrase` (asked for at the console at boot; shown redacted) in keyslots of
    their own, and the install key's keyslot removed."""
    kind: ClassVar[str] = "luks_format"
    device: str
    name: str
    cipher: str
    key_size: int
    recovery_recipients: list
    sector_size: int | None = field(default=None, metadata=OPTIONAL)
    clevis: dict | None = field(default=None, metadata=OPTIONAL)
    key_file: str | None = field(default=None, metadata=OPTIONAL)
    key_checksum: str | None = field(default=None, metadata=OPTIONAL)
    passphrase: str | None = field(default=None, metadata=OPTIONAL, repr=False)


@dataclass
class LuksOpen(Step):
    """`device` opened as /dev/mapper/`name` with the key the format step used."""
    kind: ClassVar[str] = "luks_open"
    device: str
    name: str
    discard: bool = False


@dataclass
class Crypttab(Step):
    """entries: {name, device, key_file (its path in the target, or null: clevis unlocks it,
    or the passphrase is asked for), options, unlock (the clevis pins and "passphrase", or
    ["key_file"]), root (/ stands on it: the initramfs
    opens it)}, written by the LUKS UUID read from `device`; a key file is copied into the
    target at its path, readable by root only. The image must carry what unlocking needs."""
    kind: ClassVar[str] = "crypttab"
    entries: list
