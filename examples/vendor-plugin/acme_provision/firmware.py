"""Firmware settings applied by ACME's own CLI before provision wipes anything: a setting that
changes how disks appear (a controller's mode, say) must be in place before the plan's disks
are touched."""

from dataclasses import dataclass
from typing import ClassVar

from provision_agent.plan import steps

TOOL = "/usr/local/sbin/acme-fwcli"    # shipped into the ramdisk with build.sh --extra-file


@dataclass
class FirmwareSetting(steps.Step):
    """One setting, by name, set to one value."""
    kind: ClassVar[str] = "acme_firmware"
    setting: str
    value: str


class FirmwareSettings:
    name = "acme_firmware"
    step = FirmwareSetting
    phase = "first"
    schema = {"type": "object", "required": ["settings"], "additionalProperties": False,
              "properties": {"settings": {
                  "type": "object", "minProperties": 1, "maxProperties": 32,
                  "propertyNames": {"pattern": "^[A-Za-z][A-Za-z0-9_]{0,63}$"},
                  "additionalProperties": {"type": "string", "maxLength": 64}}}}

    def validate(self, section, layout):
        # Checked before anything is written, beside the rest of the document.
        return [f"settings.{name}: ACME firmware takes Enabled or Disabled"
                for name, value in section["settings"].items()
                if name.endswith("Enable") and value not in ("Enabled", "Disabled")]

    def plan(self, section, resolved):
        return [FirmwareSetting(name, value, description=f"ACME firmware: {name} = {value}")
                for name, value in sorted(section["settings"].items())]

    def run(self, step, context):
        result = context.runner.run([TOOL, "set", step.setting, step.value])
        return {"setting": step.setting, "tool_said": result.stdout.strip()[:200]}
