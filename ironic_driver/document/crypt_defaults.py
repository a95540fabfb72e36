"""What the conductor's configuration adds to a layout with encrypted volumes, so that the
layouts of a deployment need not repeat it: the recovery keys' age recipients
([provision_agent]recovery_age_recipients), added to those a layout names (a layout, the
tenant's too, cannot keep the operator from the recovery keys by naming its own), and the Tang
servers ([provision_agent]tang_server) where a volume's unlock says `"tang": "conductor"`.

Applied to the layout before it is validated and sent, so the conductor checks what the
ramdisk gets; a `"conductor"` left unfilled (none configured) is refused there, located.
"""

import copy

from oslo_config import cfg

CONF = cfg.CONF


def tang_servers():
    """[{url, thumbprint}] from the `URL THUMBPRINT` lines of [provision_agent]tang_server."""
    servers = []
    for line in CONF.provision_agent.tang_server:
        url, _, thumbprint = line.strip().partition(" ")
        servers.append({"url": url, "thumbprint": thumbprint.strip()})
    return servers


def apply(layout):
    """A copy of layout with the conductor's defaults filled in (layout itself is kept)."""
    if not isinstance(layout, dict) or not layout.get("encrypted"):
        return layout
    layout = copy.deepcopy(layout)
    conf = CONF.provision_agent
    add_recipients(layout, conf.recovery_age_recipients)
    servers = tang_servers()
    for entry in layout["encrypted"] if isinstance(layout["encrypted"], list) else ():
        unlock = entry.get("unlock") if isinstance(entry, dict) else None
        if isinstance(unlock, dict) and unlock.get("tang") == "conductor" and servers:
            unlock["tang"] = copy.deepcopy(servers)
    return layout


def add_recipients(layout, recipients):
    """recipients added to layout's recovery.age_recipients (in place, no duplicates); a
    recovery of the wrong shape is left for the schema to refuse."""
    recovery = layout.setdefault("recovery", {}) if recipients else None
    if not isinstance(recovery, dict):
        return
    have = recovery.setdefault("age_recipients", [])
    if isinstance(have, list):
        have.extend(r for r in recipients if r not in have)
