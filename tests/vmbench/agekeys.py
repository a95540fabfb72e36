"""The operator's side of recovery keys in the tests and the demo: an age key pair made with
age-keygen, and a sealed recovery key opened with its private half."""

import re
import subprocess
from pathlib import Path


def keypair(directory):
    """(identity file, its age1... recipient), made in directory."""
    identity = Path(directory) / "operator.age"
    subprocess.run(["age-keygen", "-o", str(identity)], check=True, capture_output=True)
    return identity, re.search(r"public key: (age1\w+)", identity.read_text()).group(1)


def decrypt(identity, sealed):
    """The recovery passphrase in sealed (age's armour), opened with identity."""
    return subprocess.run(["age", "--decrypt", "--identity", str(identity)], input=sealed,
                          check=True, capture_output=True, text=True).stdout.strip()
