"""`provision` RAID interface: Ironic's software RAID settings, built by provision at deploy.

Operators coming from ironic-python-agent keep what they have: a node's target_raid_config
with `controller: software`, the raid.create_configuration / delete_configuration clean steps,
and deploy templates (picked by a flavor's trait) whose raid.apply_configuration deploy step
carries a raid_config. Here nothing is built while cleaning: the arrays are part of the
deploy's layout (raid_layout.py), made by provision with the partitions, filesystems and
bootloader, so

  create_configuration (clean step)   checks target_raid_config, picks the member disks
                                      (hints, or the inspected inventory's disks an erase
                                      would clear: raid_layout.py) and records it as
                                      node.raid_config: the next deploys build it
  delete_configuration (clean step)   forgets it (the disks' metadata go with the deploy
                                      interface's erase_devices_metadata step, as in IPA)
  apply_configuration (deploy step)   this deploy builds the raid_config given; run by a
                                      template with a priority above the deploy step's (100)

Where the layout comes from when several sources give one: layouts.py.
"""

from ironic.common import exception
from ironic.common import raid as ironic_raid
from ironic.drivers import base

from ironic_driver import ironic_compat, report
from ironic_driver.document import layouts, raid_layout

# An Ironic older than the interface supports is refused here, while the conductor loads it.
ironic_compat.require_supported()
CLEANED_KEY = layouts.RAID_MEMBERS_KEY


def _invalid(msg):
    return exception.InvalidParameterValue(report.bounded(msg, report.MESSAGE_CHARS))


def _inventory(task):
    from ironic_driver.document import inventory
    return inventory.stored_disks(task)


class ProvisionRAID(base.RAIDInterface):
    """Software RAID, built by provision as part of the deploy's layout."""

    def get_properties(self):
        return {}

    def validate_raid_config(self, task, raid_config):
        super().validate_raid_config(task, raid_config)
        try:
            disks = raid_layout.logical_disks(raid_config, "target_raid_config")
            raid_layout.member_hints(disks, _inventory(task), layouts.skip_hints(task.node),
                                     "target_raid_config")
        except raid_layout.Refused as exc:
            raise _invalid(str(exc))

    @base.clean_step(priority=0, abortable=False, requires_ramdisk=False, argsinfo={
        "create_root_volume": {"description": "Must stay true: the arrays are built together "
                                              "at deploy.", "required": False},
        "create_nonroot_volumes": {"description": "Must stay true, as above.",
                                   "required": False},
        "delete_existing": {"description": "Ignored: every deploy builds its arrays anew.",
                            "required": False}})
    def create_configuration(self, task, create_root_volume=True, create_nonroot_volumes=True,
                             delete_existing=True):
        """Record target_raid_config as the arrays the next deploys build."""
        node = task.node
        if not (create_root_volume and create_nonroot_volumes):
            raise _invalid("create_root_volume and create_nonroot_volumes must stay true: the "
                           "arrays are built together, at deploy")
        config = node.target_raid_config
        if not config:
            raise exception.MissingParameterValue("target_raid_config is not set on the node")
        try:
            disks = raid_layout.logical_disks(config, "target_raid_config")
            members = raid_layout.member_hints(disks, _inventory(task),
                                               layouts.skip_hints(node), "target_raid_config")
        except raid_layout.Refused as exc:
            raise _invalid(str(exc))
        node.set_driver_internal_info(CLEANED_KEY, members)
        node.set_driver_internal_info(layouts.RAID_PICKED_KEY, raid_layout.from_inventory(disks))
        # What Ironic shows as the node's RAID and uses for scheduling (raid_level capability)
        ironic_raid.update_raid_info(node, _current(config, members))

    @base.clean_step(priority=0, abortable=False, requires_ramdisk=False)
    def delete_configuration(self, task):
        """Forget the arrays; the next deploys build none unless asked again."""
        node = task.node
        node.del_driver_internal_info(CLEANED_KEY)
        node.del_driver_internal_info(layouts.RAID_PICKED_KEY)
        node.raid_config = {}
        node.save()

    @base.deploy_step(priority=0, argsinfo=base.RAID_APPLY_CONFIGURATION_ARGSINFO)
    def apply_configuration(self, task, raid_config, create_root_volume=True,
                            create_nonroot_volumes=True, delete_existing=True):
        """This deploy builds raid_config (a deploy template's step)."""
        if not (create_root_volume and create_nonroot_volumes):
            raise exception.InstanceDeployFailure(
                "raid.apply_configuration: create_root_volume and create_nonroot_volumes must "
                "stay true: the arrays are built together with the layout")
        layouts.record_raid_step(task, raid_config)
        task.node.save()


def _current(config, members):
    """node.raid_config as Ironic shows it: the logical disks, with the member hints."""
    disks = []
    for n, ld in enumerate(config["logical_disks"]):
        current = dict(ld, physical_disks=members)
        current["is_root_volume"] = n == 0
        disks.append(current)
    return {"logical_disks": disks}
