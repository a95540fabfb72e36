"""Building the document provision gets in the ramdisk, and checking it on the conductor.

contract.py is the document itself (the contract with provision's ironic data driver) and
sent.py what goes to the ramdisk (that document, or the bare layout for the native data driver,
and the image keyring). Which layout: layouts.py, from a name (named_layouts.py), from Ironic's
RAID settings (raid_layout.py), with the conductor's encryption defaults (crypt_defaults.py)
and the limits on what the tenant's layout may change (tenant_rules.py, placed here because it
is applied while the document is built). Which image: images.py (Glance) and oci.py, with
oci_secret.py (whose pull secret goes where) and bounded_session.py (the bounded HTTP session
that resolution runs on), both placed here as the OCI resolution's parts. inventory.py is the
node's inspected disks, which the layout is planned against; rebuild.py says whether this
deploy is a rebuild, which the document tells provision (placed here for that; the deploy
interface records and forgets it).

Nothing here talks to the ramdisk: import-linter keeps conversation/ out.
"""
