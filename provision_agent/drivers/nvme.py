"""nvme-cli: what an NVMe controller offers for erasing a namespace, and Format NVM with a
Secure Erase Setting (user data erase, or a cryptographic erase: the media key is replaced).

Format NVM acts on the one namespace named; sanitize acts on the whole controller, every
namespace on it, so it is not used here (a namespace the operator left out could share it).
"""

import json
import re

CTRL = re.compile(r"^(/dev/nvme\d+)n\d+$")
FNA_CRYPTO = 0x4        # Identify Controller FNA bit 2: cryptographic erase with Format NVM
OACS_FORMAT = 0x2       # OACS bit 1: Format NVM supported
SES_USER_DATA = 1
SES_CRYPTO = 2


def controller(namespace):
    """/dev/nvme0n1 -> /dev/nvme0; None for a device that is not an NVMe namespace."""
    m = CTRL.match(namespace)
    return m.group(1) if m else None


def capabilities(runner, namespace):
    """{"format": bool, "crypto": bool} from Identify Controller; None when nvme-cli cannot
    read it (not NVMe, no nvme-cli, a controller that refuses)."""
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
    except (ValueError, TypeError, AttributeError):
        return None
    return {"format": bool(oacs & OACS_FORMAT), "crypto": bool(fna & FNA_CRYPTO)}


def format_erase(runner, namespace, crypto, timeout=3600):
    """Format NVM of namespace with secure erase (crypto: the cryptographic one)."""
    ses = SES_CRYPTO if crypto else SES_USER_DATA
    runner.run(["nvme", "format", namespace, f"--ses={ses}", "--force",
                f"--timeout={timeout * 1000}"], timeout=timeout + 60)
