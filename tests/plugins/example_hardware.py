"""Hardware plug-ins for tests/unit/run/test_hardware_plugins.py (plug-in API 1.1): two that
offer the same step at different ranks, one that fails, one that erases disks its own way."""

from provision_agent import api
from provision_agent.errors import CommandError

SETTINGS = {"type": "object", "required": ["level"], "additionalProperties": False,
            "properties": {"level": {"type": "integer", "minimum": 1, "maximum": 3,
                                     "description": "how hard"}}}


class Generic:
    api_version = "1.1"
    name = "generic"
    steps = [api.IronicStep("vendor_tune", "tune it, generically", priority=0,
                            types=("clean",), args_schema=SETTINGS)]

    def supports(self, inventory):
        return 1

    def run_step(self, name, args, context):
        return {"by": "generic", "level": args["level"]}


class Specific(Generic):
    name = "specific"
    steps = [api.IronicStep("vendor_tune", "tune it, the vendor's way", priority=5,
                            types=("clean", "service"), args_schema=SETTINGS),
             api.IronicStep("vendor_fail", "always fails", types=("clean",))]

    def supports(self, inventory):
        return 3 if any(d["name"] == "/dev/vdb" for d in inventory["disks"]) else 0

    def run_step(self, name, args, context):
        if name == "vendor_fail":
            context.runner.run(["false"])
        return {"by": "specific", "level": args["level"], "disks": len(context.inventory[
            "disks"])}

    def erase_device(self, disk, mode, context):
        context.runner.run(["vendor-secure-erase", disk])
        return "the controller's own secure erase"


class Old(Generic):
    api_version = "1.0"
    name = "old"


class Broken(Generic):
    name = "broken"

    def supports(self, inventory):
        raise KeyError("vendor_id")


__all__ = ["CommandError"]
