"""GRUB_CMDLINE_LINUX in the target's /etc/default/grub: the input's kernel_params plus root=UUID.

grub-mkconfig sources that file as shell, so the value is shell-quoted: a parameter such as
acpi_osi="!Windows 2015" used to end the double-quoted string early (the system lost root=), and
one carrying `"; cmd; "` ran cmd. The value itself stays kernel-command-line text, which
grub-mkconfig copies into grub.cfg; validation keeps it to what grub reads as plain words.
"""

import re
import shlex

from provision_agent.drivers import target

KEY = "GRUB_CMDLINE_LINUX"


def merge(params, root_uuid=None):
    words = [w for w in (params or "").split() if not w.startswith("root=")]
    if root_uuid:
        words.insert(0, f"root=UUID={root_uuid}")
    return " ".join(words)


def set_cmdline(root, params, root_uuid=None):
    text = target.read_text(root, "/etc/default/grub")
    line = f"{KEY}={shlex.quote(merge(params, root_uuid))}"
    pattern = re.compile(rf"^{KEY}=.*$", re.M)
    if pattern.search(text):
        text = pattern.sub(line, text)
    else:
        text += ("\n" if text and not text.endswith("\n") else "") + line + "\n"
    target.write_text(root, "/etc/default/grub", text)
    return line
