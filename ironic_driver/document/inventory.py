"""The node's inspected inventory, as provision reads one (or None: not inspected)."""

from ironic.common import exception


def stored_disks(task):
    """Disks from the node's stored inspection inventory, or None when there is none."""
    from ironic import objects
    try:
        inv = objects.NodeInventory.get_by_node_id(task.context, task.node.id)
    except exception.NodeInventoryNotFound:
        return None
    from provision_agent.plan import api
    return api.inventory_from_document(inv.inventory_data or {}, "node inventory")
