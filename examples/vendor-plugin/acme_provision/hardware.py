"""ACME's hardware plug-in (provision plug-in API 1.1): Ironic steps run by ACME's own CLI in
the ramdisk, offered only on machines that have it, as an ironic-python-agent hardware manager
would offer them.

    deploy.acme_apply_settings   clean, deploy and service step (priority 0: only when asked,
                                 by a manual cleaning, a deploy template or a service request)
"""

import os
import shutil

from provision_agent import api

TOOL = "/usr/local/sbin/acme-fwcli"    # shipped into the ramdisk with build.sh --extra-file

SETTINGS = {"type": "object", "minProperties": 1, "maxProperties": 32,
            "propertyNames": {"pattern": "^[A-Za-z][A-Za-z0-9_]{0,63}$"},
            "additionalProperties": {"type": "string", "maxLength": 64},
            "description": "firmware settings by name, each to its value"}


def tool():
    """ACME's CLI where the ramdisk has it (build.sh --extra-file), else on PATH; None."""
    return TOOL if os.access(TOOL, os.X_OK) else shutil.which("acme-fwcli")


class AcmeHardware:
    api_version = "1.1"
    name = "acme"
    steps = [api.IronicStep(
        name="acme_apply_settings", types=("clean", "deploy", "service"),
        description="Apply ACME firmware settings with acme-fwcli",
        args_schema={"type": "object", "required": ["settings"],
                     "additionalProperties": False, "properties": {"settings": SETTINGS}})]

    def supports(self, inventory):
        # 2: mainline support, when ACME's CLI is there to drive the firmware; else not ours
        return 2 if tool() else 0

    def run_step(self, name, args, context):
        said = []
        for setting, value in sorted(args["settings"].items()):
            result = context.runner.run([tool(), "set", setting, value])
            said.append(result.stdout.strip()[:200])
        return {"applied": sorted(args["settings"]), "tool_said": said}
