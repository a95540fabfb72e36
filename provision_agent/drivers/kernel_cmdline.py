"""GRUB_CMDLINE_LINUX in the target's /etc/default/grub: the input's kernel_params plus root=UUID."""

import os
import re

KEY = "GRUB_CMDLINE_LINUX"


def merge(params, root_uuid=None):
    words = [w for w in (params or "").split() if not w.startswith("root=")]
    if root_uuid:
        words.insert(0, f"root=UUID={root_uuid}")
    return " ".join(words)


def set_cmdline(root, params, root_uuid=None):
    path = os.path.join(root, "etc/default/grub")
    text = open(path).read() if os.path.exists(path) else ""
    line = f'{KEY}="{merge(params, root_uuid)}"'
    pattern = re.compile(rf"^{KEY}=.*$", re.M)
    if pattern.search(text):
        text = pattern.sub(line, text)
    else:
        text += ("\n" if text and not text.endswith("\n") else "") + line + "\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return line
