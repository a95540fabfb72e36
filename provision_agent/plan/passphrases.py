"""Where a native layout, as given (a dict), holds an encrypted volume's passphrase
(`unlock.passphrase`), which provision does not take through Ironic.

Ironic keeps a node's instance_info and its deploy templates' steps in its database and shows
them through its API to whoever may read the node: a passphrase there is readable by every
such user and every database backup, and Ironic has no field it keeps secret for it. A
volume that asks for a passphrase at each boot also needs someone at the machine's console,
which a cloud's instances seldom have (a TPM2 or Tang binding opens them unattended). So the
ironic data driver and the conductor refuse it (docs/security.md), naming where it is and never
what it is; a layout given to provision by hand may hold one.
"""

REFUSAL = ("a passphrase is not taken through Ironic: Ironic keeps instance_info and deploy "
           "templates in clear and shows them to whoever may read the node; unlock the volume "
           "by tpm2 or tang (the recovery key opens it at the console)")


def passphrases(layout):
    """[location] of every passphrase in the layout (never the value)."""
    volumes = layout.get("encrypted") if isinstance(layout, dict) else None
    found = []
    for i, volume in enumerate(volumes if isinstance(volumes, list) else []):
        unlock = volume.get("unlock") if isinstance(volume, dict) else None
        if isinstance(unlock, dict) and "passphrase" in unlock:
            found.append(f"encrypted[{i}].unlock.passphrase")
    return found
