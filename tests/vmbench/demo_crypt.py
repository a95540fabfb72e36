"""What the demo adds for a sample with encrypted volumes: the VM gets a TPM (swtpm), the
recovery keys are sealed to an age key pair made for this run (the sample's recipients are
replaced: their private keys are not here), and afterwards the volumes are shown open and one
recovery key is opened with the private key, as an operator would."""

import json
from pathlib import Path

from tests.vmbench import agekeys

RECOVERY = "/tmp/vmbench/recovery.json"


def wanted(document):
    return isinstance(document, dict) and bool(document.get("encrypted"))


def prepare(document, directory):
    """(the document with this run's age recipient, provision's extra arguments, a SoftTPM)."""
    from tests.vmbench.tpm import SoftTPM
    directory = Path(directory)
    identity, recipient = agekeys.keypair(directory)
    document = json.loads(json.dumps(document))
    document.setdefault("recovery", {})["age_recipients"] = [recipient]
    print(f"  recovery keys sealed to this run's age key {recipient} (private key {identity});"
          " the VM gets a TPM 2.0 (swtpm)")
    return document, ["--recovery_key_file", RECOVERY], SoftTPM(directory / "tpm")


def show(vm, document, directory):
    """The open volumes, and the first recovery key opened with the run's private key."""
    for e in document["encrypted"]:
        name = e.get("name") or e["id"].replace(":", "-")
        status = vm.ssh(["cryptsetup", "status", name], check=False)
        print(f"  cryptsetup status {name}:\n    "
              + "\n    ".join((status.stdout or status.stderr).strip().splitlines()[:4]))
    keys = json.loads(vm.ssh(["cat", RECOVERY]).stdout)
    for k in keys:
        print(f"  {RECOVERY}: {k['name']} (LUKS UUID {k['luks_uuid']}): age ciphertext, "
              f"{len(k['age'])} bytes")
    phrase = agekeys.decrypt(Path(directory) / "operator.age", keys[0]["age"])
    print(f"  age --decrypt of {keys[0]['name']}'s recovery key with this run's private key: "
          f"a {len(phrase)}-character passphrase (the disk's own TPM unlocks "
          "it at boot; this is for the day it does not)")
