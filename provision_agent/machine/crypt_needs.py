"""What encrypting needs of the machine provision runs on, checked before the first write:
the tools (cryptsetup; age to seal the recovery keys; clevis and its pins for tpm2/tang) and,
for a TPM2 binding, a TPM. Our ramdisk has the tools; a machine without a TPM (or a ramdisk
of one's own without clevis) is refused here, not halfway through the disks."""

import os
import shutil

TPM_DEVICES = ("/dev/tpmrm0", "/dev/tpm0")


def problems(steps, which=shutil.which, exists=os.path.exists):
    """[(volume name, what is missing)] for the plan's luks_format steps."""
    found = []
    for step in steps:
        if step.kind != "luks_format":
            continue
        name, pins = step.args["name"], (step.args.get("clevis") or {}).get("pins", {})
        tools = ["cryptsetup", "age"] + (["clevis"] if pins else [])
        tools += [f"clevis-encrypt-{pin}" for pin in sorted(pins)]
        missing = [t for t in tools if not which(t)]
        if missing:
            found.append((name, f"this machine lacks {', '.join(missing)}, which encrypting "
                                "it needs (provision's ramdisk has them)"))
        if "tpm2" in pins and not any(exists(d) for d in TPM_DEVICES):
            found.append((name, "it is to be unlocked by TPM2, and this machine shows no TPM "
                                f"({' or '.join(TPM_DEVICES)}): enable it in the firmware, or "
                                "unlock by tang or a key file"))
    return found
