"""What the installed system needs of the layout's iSCSI disks: the node records it logs in
with at boot, `_netdev` on the filesystems it mounts from them (mounted once the network and
iscsid are up), and for `/` on iSCSI, the initramfs's login and its network (`ip=dhcp`, as
Debian's open-iscsi README says the initramfs needs)."""

from provision_agent.plan import iscsi
from provision_agent.plan import steps as st
from provision_agent.plan.planner_crypt import DHCP_ANY

NETDEV = "_netdev"


def netdev_options(layout, fs, options):
    """fstab options of a filesystem: `_netdev` added when it is on iSCSI (not `/`, which the
    initramfs mounts), as curtin writes them."""
    if fs.type == "swap" or fs.mount == "/" or not iscsi.on_iscsi(layout, fs.device):
        return options
    words = (options or "defaults").split(",")
    return options if NETDEV in words else ",".join(words + [NETDEV])


def conf_steps(layout):
    """The iscsi_conf step, when the layout has iSCSI disks and an installed system."""
    disks = [d for d in layout.disks if d.iscsi]
    if not disks or not layout.filesystems:
        return []
    root = iscsi.root_target(layout)
    initiator = next((d.iscsi.initiator for d in disks if d.iscsi.initiator), None)
    targets = [iscsi.entry(d.iscsi) for d in disks]
    shown = ", ".join(f"{t['target']} at {t['portal']}" for t in targets)
    return [st.IscsiConf(initiator, targets, iscsi.entry(root.iscsi) if root else None,
                         description=f"iSCSI node records (startup automatic) for {shown}"
                         + (" and the initramfs's login for /" if root else ""))]


def root_kernel_params(layout, params, why):
    """(params, why) with DHCP on any interface (initramfs-tools' `ip=`) added when / is on
    iSCSI and the parameters configure no network of the operator's own."""
    if iscsi.root_target(layout) is None or any(w.startswith("ip=")
                                                   for w in (params or "").split()):
        return params, why
    return (f"{params or ''} {DHCP_ANY}".strip(),
            f"{why}; {DHCP_ANY} added: the initramfs logs in to the iSCSI target / is on")
