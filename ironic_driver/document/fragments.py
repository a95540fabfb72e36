"""Layout fragments: a deploy template (picked by a trait) adds step-kind plug-in sections to
whatever layout the deploy gets (layouts.py: instance_info's, a set_layout or
raid.apply_configuration template's, the RAID a clean step recorded, the node's default, or
Ironic's classic layout), with the deploy step `deploy.add_extensions`:

    {"interface": "deploy", "step": "add_extensions", "priority": 150,
     "args": {"extensions": {"acme_firmware": {"settings": {"BootMode": "Uefi"}}}}}

Order and conflicts: the layout's own `extensions` first, then each template's sections in the
order Ironic runs the steps (priority, highest first); a plug-in's section given twice (by the
layout and a template, or by two templates) is refused, naming both, at validate (templates)
and by the step itself (a --deploy-steps one). Like set_layout, the step must run before
deploy.deploy hands the ramdisk its document (priority above 100). The sections are read from
Ironic's own deploy_steps when the document is built, never copied into driver_internal_info
(a plug-in section may hold a secret, and that record is shown unmasked).
"""

import logging

from ironic.common import exception
from ironic.drivers import base

from ironic_driver.document import layouts

LOG = logging.getLogger(__name__)
STEP = "add_extensions"
ARGSINFO = {"extensions": {
    "description": "Step-kind plug-in sections to add to this deploy's layout, by plug-in name "
                   "(the native document's `extensions`): {\"NAME\": {...}}.",
    "required": True}}
MAX_SECTIONS = 32


def _invalid(where, msg):
    return exception.InvalidParameterValue(f"{where}: {msg}")


def _checked(where, extensions):
    if not isinstance(extensions, dict) or not extensions or len(extensions) > MAX_SECTIONS \
            or not all(isinstance(k, str) and isinstance(v, dict)
                       for k, v in extensions.items()):
        raise _invalid(where, f"extensions must be an object of 1 to {MAX_SECTIONS} plug-in "
                              "sections, each an object, by plug-in name")
    return where, extensions


def from_templates(task):
    """[(where, sections)] of the add_extensions steps of the deploy templates that match the
    instance's traits, in the order Ironic would run them."""
    from ironic.objects import deploy_template
    traits = (task.node.instance_info or {}).get("traits")
    traits = [t for t in traits if isinstance(t, str)] if isinstance(traits, list) else []
    found = []
    for template in deploy_template.DeployTemplate.list_by_names(task.context, traits) \
            if traits else ():
        for step in template.steps:
            if (step["interface"], step["step"]) != ("deploy", STEP) or step["priority"] <= 0:
                continue
            where = f"deploy template {template.name} (step deploy.{STEP})"
            _check_priority(where, step["priority"])
            found.append((step["priority"], where, (step.get("args") or {}).get("extensions")))
    found.sort(key=lambda item: -item[0])
    return [_checked(where, ext) for _prio, where, ext in found]


def from_steps(node):
    """[(where, sections)] of this deploy's add_extensions steps (Ironic's deploy_steps, in
    the order it runs them)."""
    found = []
    for step in (node.driver_internal_info or {}).get("deploy_steps") or []:
        if (step.get("interface"), step.get("step")) == ("deploy", STEP):
            where = f"deploy step deploy.{STEP} (priority {step.get('priority')})"
            found.append(_checked(where, (step.get("args") or {}).get("extensions")))
    return found


def _check_priority(where, priority):
    if priority <= layouts.DEPLOY_STEP_PRIORITY:
        raise _invalid(where, f"priority {priority} runs after the deploy step (priority "
                              f"{layouts.DEPLOY_STEP_PRIORITY}) has already handed the ramdisk "
                              f"its document; give it a priority above "
                              f"{layouts.DEPLOY_STEP_PRIORITY}")


def merge(fragments, own=None, own_where="the layout"):
    """The sections the fragments add, in order; InvalidParameterValue for a section given
    twice. own: the layout's own extensions, which come first and are never replaced."""
    seen = {name: own_where for name in (own or {})}
    merged = {}
    for where, sections in fragments:
        for name, section in sections.items():
            if name in seen:
                raise _invalid(where, f"adds the plug-in section {name!r}, which "
                                      f"{seen[name]} already gives; one section per plug-in: "
                                      "remove it from one of them")
            seen[name] = where
            merged[name] = section
    return merged


class FragmentSteps:
    """The deploy interface's deploy step that adds a template's plug-in sections."""

    @base.deploy_step(priority=0, argsinfo=ARGSINFO)
    def add_extensions(self, task, extensions):
        """Add step-kind plug-in sections to this deploy's layout (a deploy template's step,
        priority above 100); the document built for the ramdisk carries them."""
        node = task.node
        where = f"deploy step deploy.{STEP}"
        for step in (node.driver_internal_info or {}).get("deploy_steps") or []:
            if (step.get("interface"), step.get("step")) == ("deploy", STEP):
                try:
                    _check_priority(where, step.get("priority", 0))
                except exception.InvalidParameterValue as exc:
                    raise exception.InstanceDeployFailure(str(exc))
        try:
            _checked(where, extensions)
            merge(from_steps(node))
        except exception.InvalidParameterValue as exc:
            raise exception.InstanceDeployFailure(str(exc))
        LOG.info("Node %s: deploy step %s adds the plug-in section(s) %s to its layout",
                 node.uuid, STEP, ", ".join(sorted(extensions)))
