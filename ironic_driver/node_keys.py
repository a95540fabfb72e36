"""Names of the node's driver_internal_info keys that both sides of this interface read.

Every key of ours starts with PREFIX. The conversation with the ramdisk (job.py) forgets its
own keys when a job begins and when the deploy is torn down, and keeps those the document side
owns, which outlive a job: where the deploy's layout came from (layouts.py), the RAID members a
clean step picked (raid.py) and whose instance the disks hold (rebuild.py). Names only, so that
neither side imports the other for them; the values are each owner's business.
"""

PREFIX = "provision_"
LAYOUT_STEP = PREFIX + "layout_step"
RAID_MEMBERS = PREFIX + "raid_members"
RAID_PICKED = PREFIX + "raid_members_picked"
DEPLOYED_INSTANCE = PREFIX + "deployed_instance"
DOCUMENT_SIDE = (LAYOUT_STEP, RAID_MEMBERS, RAID_PICKED, DEPLOYED_INSTANCE)
