"""Plug-ins that break the contract in the ways a vendor's first try does
(tests/unit/plan/test_plugin_api.py): each failure must come back naming the plug-in."""

from provision_agent.plan import step_base
from tests.plugins import example_vendor


class _Base(example_vendor.VendorRaid):
    where = ""          # which of validate, plan, run raises

    def validate(self, section, layout):
        if self.where == "validate":
            return [section["no_such_key"]]
        return []

    def plan(self, section, resolved):
        if self.where == "plan":
            return [section["no_such_key"]]
        return super().plan(section, resolved)

    def run(self, step, context):
        if self.where == "run":
            raise RuntimeError("the controller said no")
        return super().run(step, context)


def _kind(where):
    """A plug-in of the vendor_raid kind whose `where` raises."""
    return type(f"Broken{where.title()}", (_Base,), {"where": where})


BrokenValidate = _kind("validate")
BrokenPlan = _kind("plan")
BrokenRun = _kind("run")


class NeedsApi2(example_vendor.VendorRaid):
    api_version = "2.0"


class NotAStep(step_base.Step):
    pass
