"""`provision steps` and `provision step`: the Ironic steps the hardware plug-ins installed
here offer on this machine (run/hardware.py), and one of them run; `provision inventory` with
a plug-in's inventory override. The conductor runs them in the ramdisk as it runs `provision
erase` (ironic_driver/conversation/vendor_steps.py)."""

import json

from provision_agent import errors
from provision_agent.cli import input_source, outcome


def own_inventory(conf):
    """This machine's inventory (a recorded one with --inventory_file), before plug-ins."""
    if getattr(conf, "inventory_file", None):
        from provision_agent.plan import inventory
        return {"disks": inventory.load(conf.inventory_file), "optical_drives": []}
    from provision_agent.machine import disks as live
    from provision_agent.run.runner import Runner
    return {"disks": live.discover(Runner()), "optical_drives": live.optical()}


def run_inventory(conf):
    from provision_agent.run import hardware
    print(json.dumps({"inventory": hardware.inventory(own_inventory(conf))}, indent=2))
    return errors.EXIT_OK


def run_steps(conf):
    """Prints the listing; also as one {"event": "steps"} event, which the conductor reads."""
    from provision_agent.run import hardware
    from provision_agent.run.events import Events
    listing = hardware.listing(hardware.inventory(own_inventory(conf)))
    events = Events.from_conf(conf)
    try:
        events.emit("steps", **listing)
        events.result("ok", errors.EXIT_OK)
    finally:
        events.close()
    print(json.dumps(listing, indent=1))
    return errors.EXIT_OK


def run_step(conf):
    from provision_agent.run import hardware
    from provision_agent.run.events import Events
    from provision_agent.run.runner import Runner
    document = input_source.read_input(conf.input_data_file, conf.input_data_url,
                                       ca_bundle=conf.input_data_ca_bundle,
                                       insecure=conf.input_data_insecure)
    events = Events.from_conf(conf)
    with outcome.reported(events):
        inventory = hardware.inventory(own_inventory(conf))
        report = hardware.run_step(document, inventory, Runner(), events,
                                   dry_run=conf.dry_run)
    print(json.dumps(report, indent=1, default=str))
    return errors.EXIT_OK
