"""Hardware types that accept the provision deploy interface.

Ironic only lets a node use a deploy or RAID interface its hardware type lists (fake-hardware
excepted), and the in-tree types list only in-tree classes. These are the in-tree types with
ProvisionDeploy and ProvisionRAID added, registered as provision-ipmi, provision-redfish and
provision-manual-management; everything else about them is unchanged.
"""

from ironic.conf import CONF
from ironic.drivers import generic, ipmi, redfish
from oslo_config import cfg

from ironic_driver.deploy import ProvisionDeploy
from ironic_driver.raid import ProvisionRAID

# Ironic 39's Redfish code reads the default CA bundle from the config group named after the
# node's hardware type (drivers/utils.py get_verify_ca: CONF.get(node.driver)), and an unknown
# group raises NoSuchOptError there instead of returning the default: every provision-redfish
# node failed to verify. The group exists, with the one option Ironic looks up, defaulting to
# [redfish]verify_ca (drivers load after ironic.conf is read) so that setting stays the one
# operators know.
CONF.register_opts([cfg.StrOpt(
    "verify_ca", default=CONF.redfish.verify_ca,
    help="For provision-redfish nodes: the CA bundle used when driver_info/redfish_verify_ca "
         "is missing or true. Defaults to [redfish]verify_ca.")], group="provision-redfish")


class _WithProvision:
    @property
    def supported_deploy_interfaces(self):
        return [ProvisionDeploy] + super().supported_deploy_interfaces

    @property
    def supported_raid_interfaces(self):
        return super().supported_raid_interfaces + [ProvisionRAID]


class ProvisionIPMIHardware(_WithProvision, ipmi.IPMIHardware):
    pass


class ProvisionRedfishHardware(_WithProvision, redfish.RedfishHardware):
    pass


class ProvisionManualManagementHardware(_WithProvision, generic.ManualManagementHardware):
    pass
