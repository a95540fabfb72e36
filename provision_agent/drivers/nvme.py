"""nvme-cli: what an NVMe controller offers for erasing a namespace, and Format NVM with a
Secure Erase Setting (user data erase, or a cryptographic erase: the media key is replaced).

Format NVM names one namespace, but a controller whose Identify Controller FNA bit 0 or 1 is
set applies the format, or its secure erase, to every namespace of the NVM subsystem: then it
is used only when every namespace there is being erased (format_spares). Sanitize always acts
on the whole subsystem, so it is not used here (a namespace the operator left out could share
it).
"""

import json
import re

CTRL = re.compile(r"^(/dev/nvme\d+)n\d+$")
FNA_FORMAT_ALL = 0x1    # FNA bit 0: a format of one namespace formats all of them
FNA_ERASE_ALL = 0x2     # FNA bit 1: a secure erase of one namespace erases all of them
FNA_CRYPTO = 0x4        # FNA bit 2: cryptographic erase with Format NVM
OACS_FORMAT = 0x2       # OACS bit 1: Format NVM supported
OACS_NS_MGMT = 0x8      # OACS bit 3: namespace management (namespaces may be detached)
CMIC_CONTROLLERS = 0x2  # CMIC bit 1: the NVM subsystem may have two or more controllers
SES_USER_DATA = 1
SES_CRYPTO = 2
# `nvme list-ns`: "[   0]:0x1" per namespace; `nvme get-ns-id`: "nvme0n1: namespace-id:1"
NSID_LINE = re.compile(r"^\[\s*\d+\]:0x([0-9a-fA-F]{1,8})$")
NSID_OF = re.compile(r"namespace-id:\s*(\d{1,10})\s*$")
MAX_NAMESPACES = 1024   # the ID lists hold at most 1024 entries


def controller(namespace):
    """/dev/nvme0n1 -> /dev/nvme0; None for a device that is not an NVMe namespace."""
    m = CTRL.match(namespace)
    return m.group(1) if m else None


def capabilities(runner, namespace):
    """{"format", "crypto", "all_namespaces" (FNA bit 0 or 1), "ns_mgmt", "controllers"
    (CMIC: more than one may share the subsystem)} from Identify Controller; None when
    nvme-cli cannot read it (not NVMe, no nvme-cli, a controller that refuses)."""
    ctrl = controller(namespace)
    if ctrl is None:
        return None
    res = runner.run(["nvme", "id-ctrl", ctrl, "--output-format=json"], check=False,
                     timeout=60)
    if res.returncode != 0:
        return None
    try:
        ident = json.loads(res.stdout)
        oacs, fna = int(ident.get("oacs", 0)), int(ident.get("fna", 0))
        cmic = int(ident.get("cmic", 0))
    except (ValueError, TypeError, AttributeError):
        return None
    return {"format": bool(oacs & OACS_FORMAT), "crypto": bool(fna & FNA_CRYPTO),
            "all_namespaces": bool(fna & (FNA_FORMAT_ALL | FNA_ERASE_ALL)),
            "ns_mgmt": bool(oacs & OACS_NS_MGMT), "controllers": bool(cmic & CMIC_CONTROLLERS)}


def format_spares(runner, namespace, caps, erasing):
    """Why Format NVM must not erase namespace: the controller applies it to every namespace
    of the subsystem (FNA bit 0 or 1) and one of them is not in erasing (the namespaces being
    erased), or which ones it holds cannot be read. None when the format reaches no other."""
    if not caps.get("all_namespaces"):
        return None
    ctrl = controller(namespace)
    head = (f"Format NVM on {ctrl} applies to every namespace of its subsystem "
            f"(Identify Controller FNA bit 0 or 1)")
    held = subsystem_namespaces(runner, ctrl, caps)
    if held is None:
        return f"{head}, and which namespaces it holds cannot be read"
    erased = {namespace_id(runner, name) for name in erasing if controller(name) == ctrl}
    spared = sorted(held - erased)
    if spared:
        return (f"{head}, and namespace ID {', '.join(str(n) for n in spared)} there is not "
                "being erased")
    return None


def subsystem_namespaces(runner, ctrl, caps):
    """The IDs of every namespace of ctrl's NVM subsystem, or None when they cannot be told:
    the allocated list (attached or not, any controller) when the controller gives it, else
    the active one, which is all of them only for a lone controller without namespace
    management."""
    found = _list_ns(runner, ctrl, ["--all"])
    if found is None and not (caps.get("ns_mgmt") or caps.get("controllers")):
        found = _list_ns(runner, ctrl, [])
    return found


def _list_ns(runner, ctrl, extra):
    res = runner.run(["nvme", "list-ns", ctrl, *extra], check=False, timeout=60)
    if res.returncode != 0:
        return None
    ids = set()
    for line in res.stdout.splitlines()[:MAX_NAMESPACES + 1]:
        m = NSID_LINE.match(line.strip())
        if m is None:
            return None     # not what nvme-cli prints: nothing is known
        ids.add(int(m.group(1), 16))
    return ids


def namespace_id(runner, namespace):
    """The NSID of a namespace block device (None when nvme-cli cannot tell)."""
    res = runner.run(["nvme", "get-ns-id", namespace], check=False, timeout=60)
    m = NSID_OF.search(res.stdout.strip()) if res.returncode == 0 else None
    return int(m.group(1)) if m else None


def format_erase(runner, namespace, crypto, timeout=3600):
    """Format NVM of namespace with secure erase (crypto: the cryptographic one)."""
    ses = SES_CRYPTO if crypto else SES_USER_DATA
    runner.run(["nvme", "format", namespace, f"--ses={ses}", "--force",
                f"--timeout={timeout * 1000}"], timeout=timeout + 60)
