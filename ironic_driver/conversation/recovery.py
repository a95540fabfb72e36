"""The recovery keys of a deploy's encrypted volumes, as provision leaves them in the ramdisk
(--recovery_key_file): each one age ciphertext, readable only with a private key the operator
holds. They go into the node's driver_internal_info (provision_recovery_keys) and nowhere
else: not into events, logs or last_error. docs/ironic.md says how to read one back.

What the ramdisk wrote is checked like everything it sends: a bounded read, a list of at most
MAX_VOLUMES entries of four bounded strings, the ciphertext in age's armour.
"""

import json
import re

FILE = "recovery-keys.json"
MAX_VOLUMES = 256
MAX_BYTES = 64 * 1024 * 4
_ARMOUR = re.compile(r"-----BEGIN AGE ENCRYPTED FILE-----\r?\n[A-Za-z0-9+/=\r\n]{1,16384}"
                     r"-----END AGE ENCRYPTED FILE-----\r?\n?")
_FIELDS = {"name": 128, "device": 4096, "luks_uuid": 64, "age": 20000}


class BadKeys(ValueError):
    """What the ramdisk wrote is not a list of sealed recovery keys."""


def parse(data):
    """The list of {name, device, luks_uuid, age} in data (bytes, None: no file)."""
    if data is None:
        return None
    if len(data) > MAX_BYTES:
        raise BadKeys(f"more than {MAX_BYTES} bytes")
    try:
        keys = json.loads(data)
    except ValueError:
        raise BadKeys("not JSON") from None
    if not isinstance(keys, list) or not 0 < len(keys) <= MAX_VOLUMES:
        raise BadKeys(f"not a list of 1 to {MAX_VOLUMES} volumes")
    for key in keys:
        if not isinstance(key, dict) or set(key) != set(_FIELDS) or not all(
                isinstance(key[k], str) and 0 < len(key[k]) <= n for k, n in _FIELDS.items()):
            raise BadKeys("an entry is not {name, device, luks_uuid, age} of bounded strings")
        if not _ARMOUR.fullmatch(key["age"]):
            raise BadKeys(f"the recovery key of {key['name'][:64]!r} is not age ciphertext")
    return keys
