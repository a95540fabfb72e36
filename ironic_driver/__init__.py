"""The `provision` deploy and RAID interfaces for Ironic's conductor.

On top, the modules Ironic loads and calls: hardware.py (the hardware types), deploy.py and
raid.py (the interfaces), validation.py (their validate(): the SSH settings and the instance's
data), config.py (the [provision_agent] options; oslo-config-generator's namespace
ironic_driver). Under them, side by side and importing nothing of each other:

    document/      building the document provision gets (layouts, images, the OCI
                   resolution, what the tenant may not change)
    conversation/  talking to the ramdisk and following its job (heartbeats, SSH, the
                   job's state in the node, pacing the looks, recording progress)

The interfaces hand the conversation the function that builds what it sends
(document.sent.for_ramdisk). Both sides use report.py (what outside text the node and the
logs keep), node_keys.py (the driver_internal_info keys both read) and ironic_compat.py
(where Ironic's releases differ).
"""
