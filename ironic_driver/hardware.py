"""Hardware types that accept the provision deploy interface.

Ironic only lets a node use a deploy interface its hardware type lists (fake-hardware
excepted), and the in-tree types list only in-tree classes. These are the in-tree types with
ProvisionDeploy added, registered as provision-ipmi, provision-redfish and
provision-manual-management; everything else about them is unchanged.
"""

from ironic.drivers import generic, ipmi, redfish

from ironic_driver.deploy import ProvisionDeploy


class _WithProvision:
    @property
    def supported_deploy_interfaces(self):
        return [ProvisionDeploy] + super().supported_deploy_interfaces


class ProvisionIPMIHardware(_WithProvision, ipmi.IPMIHardware):
    pass


class ProvisionRedfishHardware(_WithProvision, redfish.RedfishHardware):
    pass


class ProvisionManualManagementHardware(_WithProvision, generic.ManualManagementHardware):
    pass
