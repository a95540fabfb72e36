"""What the Ironic conductor uses of provision: the public planning API. The conductor runs
the same checks as `provision --dry_run` before anything boots, and nothing here touches a
machine (the import contracts in setup.cfg keep it so)."""

from provision_agent.plan import (
    boot_mode,
    inventory,
    keep_on_rebuild,
    local_paths,
    passphrases,
    pipeline,
)

load_layout = pipeline.load_layout
check_layout = pipeline.check_layout
build_plan = pipeline.build_plan
data_driver_names = pipeline.data_driver_names
inventory_from_document = inventory.from_document
match_hints = inventory.match
left_alone = inventory.left_alone
apply_boot_mode = boot_mode.apply
# "keep": "on_rebuild" in a layout: true on a rebuild of the same instance, else false
apply_keep_on_rebuild = keep_on_rebuild.apply
# what the conductor refuses in any layout it sends (the ironic data driver does too)
local_paths_of = local_paths.local_paths
local_path_refusal = local_paths.refusal
# encrypted volumes' passphrases: never through Ironic (plan/passphrases.py says why)
passphrases_of = passphrases.passphrases
passphrase_refusal = passphrases.REFUSAL
