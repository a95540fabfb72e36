"""Whether a deploy is a rebuild of the instance an earlier deploy of ours made, or a first
deploy: what a layout's `"keep": "on_rebuild"` turns on (provision_agent/plan/keep_on_rebuild.py).

Ironic's rebuild (`baremetal node rebuild`, Nova's rebuild) deploys an ACTIVE (or DEPLOYFAIL)
node again without undeploying it; by the time the deploy steps run, the node's state is
DEPLOYING as for a first deploy, and nothing of Ironic's says which it was. So the deploy
interface records it itself: once provision has written a node's disks, KEY holds the
instance's uuid; undeploy (tear_down, before cleaning erases the disks for the next tenant)
removes it. A deploy that finds KEY naming the same instance is a rebuild; a new instance_uuid,
or no KEY, is a first deploy, and nothing is kept from before.
"""

from ironic_driver import node_keys

KEY = node_keys.DEPLOYED_INSTANCE
# a node deployed standalone (no Nova) has no instance_uuid
STANDALONE = "standalone"


def _instance(node):
    return node.instance_uuid or STANDALONE


def mark(node):
    """The node's disks now hold this instance's layout (provision exited 0)."""
    node.set_driver_internal_info(KEY, _instance(node))


def forget(node):
    """Undeploy: the next deploy is a first one, whoever it is for."""
    node.del_driver_internal_info(KEY)


def is_rebuild(node):
    return (node.driver_internal_info or {}).get(KEY) == _instance(node)
