"""The plug-in API, version API_VERSION: what a step-kind plug-in (docs/extending.md) may use.
Everything named here is stable within a major version: a 1.x provision runs every plug-in
written for 1.y with y <= x; a name leaves, or changes meaning, only with a new major version.
A plug-in says which version it was written for (`api_version = "1.0"`); a provision that does
not offer it refuses the plug-in when it loads, naming it.

    API_VERSION     "MAJOR.MINOR"
    Step            base of a plug-in's step dataclass (its fields: the step's arguments)
    SECRET          field(metadata=SECRET): a field shown as <redacted> (or secret_fields)
    PHASES          where a plug-in's steps may run, in order; NEEDS_ROOT: those with the new
                    system mounted
    Context         run(step, context)'s context: runner, events, options, layout, target
    Target          context.target: the new system's files and commands, inside its root
    IronicStep      (1.1) an Ironic clean/deploy/service step a hardware plug-in offers
    HardwareContext (1.1) run_step's and erase_device's context: runner, events, inventory
    errors          CommandError (a command failed: its argv, exit code, stderr), InputError,
                    Problem, TargetError, PluginStepError (what provision raises for a
                    failing run(), naming the plug-in, its package and its step)
"""

from provision_agent.errors import CommandError, InputError, Problem, ProvisionError
from provision_agent.plan.extensions import (
    ALIASES,
    API_VERSION,
    NEEDS_ROOT,
    PHASES,
    PluginError,
    PluginStepError,
)
from provision_agent.plan.step_base import SECRET, Step
from provision_agent.run.hardware import HardwareContext, IronicStep
from provision_agent.run.plugin_context import READ_LIMIT, Context, Target, TargetError

__all__ = ["API_VERSION", "ALIASES", "NEEDS_ROOT", "PHASES", "SECRET", "READ_LIMIT", "Step",
           "Context", "Target", "CommandError", "InputError", "Problem", "ProvisionError",
           "PluginError", "PluginStepError", "TargetError", "IronicStep", "HardwareContext"]
