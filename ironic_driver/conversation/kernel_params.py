"""The words of instance_info/kernel_append_params our ramdisk would obey, refused.

Ironic builds the deploy ramdisk's kernel command line from instance_info/kernel_append_params
when it is set (else driver_info's, else [pxe]/[redfish]kernel_append_params): on PXE before
its own words, on virtual media's ISO after them (`drivers/utils.py:get_kernel_append_params`,
`common/pxe_utils.py:build_extra_pxe_options`, `image_utils._prepare_kernel_cmd_line`). Ironic
documents the field as the *instance's* kernel parameters; for this interface the instance boots
from its disk, so the field reaches only our ramdisk, and whoever deploys the node sets
instance_info. The words our ramdisk reads would let that tenant log in to the ramdisk as root
(`sshkey=`), replace its /init, or steer its agent; driver_info and the configuration are the
operator's and are not looked at. docs/ironic.md section 5 says where this differs from Ironic.
"""

import re

from ironic.common import exception

FIELD = "kernel_append_params"

# (how a word's key matches, why the ramdisk must not take it from a tenant). Keys compared
# lower-cased, "_" read as "-": the kernel reads "-" and "_" alike in its own parameters, and
# a refusal too many costs a tenant nothing it needs here.
RULES = (
    (lambda k: k == "sshkey",
     "the ramdisk's init would authorize it as an SSH key for root"),
    (lambda k: k in ("init", "rdinit"),
     "the kernel would run that program instead of the ramdisk's /init and its checks"),
    (lambda k: k.startswith("provision."),
     "it is a setting of the provision ramdisk (provision.hostkey=baked keeps the build's SSH "
     "host key, which anyone who can download the initramfs can read)"),
    (lambda k: k.startswith("ipa-"),
     "it is a setting of the ramdisk's Ironic agent (the API it reports to, its agent token, "
     "TLS verification), which Ironic's boot interface sets"),
    (lambda k: k == "boot-method",
     "it tells the ramdisk's init it booted from virtual media and to take its network from "
     "the CD-ROM"),
    (lambda k: k == "bootif",
     "it names the NIC the ramdisk's agent reports to inspection"),
    # The interface's loglevel=4 keeps the kernel's own print of its command line, with a
    # virtual-media boot's agent token, off the console; on the ISO these come after it, and
    # whoever has the token can have the conductor send it the node's document.
    (lambda k: k in ("loglevel", "debug", "ignore-loglevel", "printk.ignore-loglevel"),
     "it would have the kernel print its command line, with the agent token of a "
     "virtual-media boot, on the console"),
)


def _words(text):
    """The words the kernel, init and the agent each see: split at any blank (the shell and the
    agent split there even inside a quoted value), a leading quote dropped (the kernel drops
    it before `init="..."`)."""
    return [w.lstrip('"') for w in re.split(r"\s+", text) if w.lstrip('"')]


def refused(text):
    """[(key, why)] of the words of a kernel_append_params value the ramdisk would obey."""
    found = []
    for word in _words(text):
        key = word.partition("=")[0][:64]     # shown in the error: a word may be KiBs
        norm = key.lower().replace("_", "-")
        for matches, why in RULES:
            if matches(norm) and (key, why) not in found:
                found.append((key, why))
    return found


def check_instance_info(info):
    """Refuse instance_info/kernel_append_params words the ramdisk interprets (validate, and
    every boot into the ramdisk: a cleaning runs without our validate)."""
    text = (info or {}).get(FIELD)
    if not isinstance(text, str):
        return      # absent; anything else Ironic's own parsing refuses
    found = refused(text)
    if found:
        key, why = found[0]
        more = f" (and {', '.join(repr(k) for k, _ in found[1:])})" if found[1:] else ""
        raise exception.InvalidParameterValue(
            f"instance_info/{FIELD} names {key!r}{more}, which this deploy interface refuses: "
            f"Ironic puts these parameters on the deploy ramdisk's kernel command line too, and "
            f"there {why}. Remove it from instance_info; the operator sets the ramdisk's own "
            f"parameters in driver_info/{FIELD} or [pxe]/[redfish]{FIELD}")
