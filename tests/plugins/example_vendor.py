"""An example step-kind plug-in (docs/extending.md): a vendor's RAID controller configured
before any disk is touched, the way a site would add one without forking provision.

Installed by a tests/unit fixture as the entry point
    [provision_agent.step_kinds]
    vendor_raid = tests.plugins.example_vendor:VendorRaid
    vendor_agent = tests.plugins.example_vendor:VendorAgent
"""

from dataclasses import dataclass
from typing import ClassVar

from provision_agent.plan import steps


@dataclass
class VendorRaidStep(steps.Step):
    """A logical volume made by the vendor's controller CLI."""
    kind: ClassVar[str] = "vendor_raid"
    controller: str
    level: int
    slots: list


class VendorRaid:
    api_version = "1.0"
    name = "vendor_raid"
    step = VendorRaidStep
    phase = "first"
    schema = {"type": "object", "required": ["controller", "volumes"],
              "additionalProperties": False,
              "properties": {
                  "controller": {"type": "string", "pattern": "^slot[0-9]{1,2}$"},
                  "volumes": {"type": "array", "minItems": 1, "maxItems": 8, "items": {
                      "type": "object", "required": ["level", "slots"],
                      "additionalProperties": False,
                      "properties": {"level": {"enum": [0, 1, 5, 10]},
                                     "slots": {"type": "array", "minItems": 1,
                                               "items": {"type": "integer"}}}}}}}

    def validate(self, section, layout):
        problems = []
        for i, volume in enumerate(section["volumes"]):
            if volume["level"] == 1 and len(volume["slots"]) != 2:
                problems.append(f"volumes[{i}]: RAID1 on this controller takes two slots")
        return problems

    def plan(self, section, resolved):
        return [VendorRaidStep(section["controller"], v["level"], v["slots"],
                               description=f"RAID{v['level']} on controller "
                                           f"{section['controller']} over slots {v['slots']}")
                for v in section["volumes"]]

    def run(self, step, context):
        context.runner.run(["vendor-raidcli", "--controller", step.controller, "create",
                            "--level", str(step.level),
                            "--slots", ",".join(map(str, step.slots))])
        return {"controller": step.controller}


@dataclass
class VendorAgentStep(steps.Step):
    """The vendor's agent configuration written into the installed system."""
    kind: ClassVar[str] = "vendor_agent"
    path: str
    server: str
    licence_key: str


class VendorAgent:
    """An in-target step through the plug-in API (provision_agent.api): a file written into
    the new system (links resolved inside it) and a command run inside it, before the
    initramfs and the bootloader, with its licence key secret."""
    api_version = "1.0"
    name = "vendor_agent"
    step = VendorAgentStep
    phase = "before_boot"
    secret_fields = {"licence_key"}
    schema = {"type": "object", "required": ["server", "licence_key"],
              "additionalProperties": False,
              "properties": {"server": {"type": "string", "maxLength": 200},
                             "licence_key": {"type": "string", "maxLength": 200}}}

    def validate(self, section, layout):
        return []

    def plan(self, section, resolved):
        return [VendorAgentStep("/etc/vendor/agent.conf", section["server"],
                                section["licence_key"],
                                description=f"vendor agent for {section['server']} "
                                            f"(licence {section['licence_key']})")]

    def run(self, step, context):
        where = context.target.write_text(
            step.path, f"server = {step.server}\nlicence = {step.licence_key}\n", mode=0o600)
        enabled = context.target.exists("/usr/bin/vendor-agent-enable")
        if enabled:     # the image ships the vendor's tool: run it inside the new system
            context.target.run(["vendor-agent-enable", "--licence", step.licence_key])
        return {"written": step.path, "host_path": where, "enabled": enabled}
