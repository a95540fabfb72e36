"""Which layout a deploy gets. First found wins:

1. instance_info/provision_layout                      (this deploy)
2. the `set_layout` deploy step's `layout` argument, or the RAID interface's
   `apply_configuration` deploy step's `raid_config`   (a deploy template matched by the
   instance's traits, i.e. a flavor's trait:CUSTOM_...=required; or `--deploy-steps`)
3. the software RAID the raid.create_configuration clean step recorded (raid.py)
4. driver_info/provision_layout                         (the node's default)
5. none: the ironic data driver builds Ironic's classic layout from instance_info

Each source holds either a native layout (a JSON object, or its JSON text as the REST API
stores whatever the client sent) or the NAME of a file <[provision_agent]layouts_dir>/NAME.json
on the conductor. Names are resolved on the conductor; the ramdisk always receives the layout
itself.

The step has to run before the `deploy` step uploads the document, so a template must give it a
priority above DEPLOY_STEP_PRIORITY (validate refuses lower ones). When it runs it checks its
argument and records in driver_internal_info[STEP_KEY] where the layout came from: the source,
the name (for a named layout) and the layout's digest, never the layout itself (a layout may
carry configdrive content and credentialed image URLs, and driver_internal_info outlives the
deploy and is shown by the API unmasked). The upload reads the layout again, from the named
file or from the step's argument in Ironic's own deploy_steps (which Ironic drops when the
deploy ends), and refuses it if it is no longer what the step checked. prepare() forgets the
record at the start of every deploy, so a rebuild without the trait does not inherit it, and
tear_down and clean_up drop it. validate() runs before the steps (and before Ironic stores
--deploy-steps), so there the step's argument is read from the matching deploy templates
instead.
"""

import hashlib
import json
from dataclasses import dataclass

from ironic.common import exception

from ironic_driver import node_keys
from ironic_driver.document import named_layouts, raid_layout

STEP = "set_layout"
RAID_STEP = "apply_configuration"
STEP_KEY = node_keys.LAYOUT_STEP
# the member disks raid.create_configuration picked (raid.py), and whether it took them from
# the inventory (no physical_disks); a record without it is taken as picked, the safe side
RAID_MEMBERS_KEY = node_keys.RAID_MEMBERS
RAID_PICKED_KEY = node_keys.RAID_PICKED
# ProvisionDeploy.deploy's priority; a unit test keeps the two equal.
DEPLOY_STEP_PRIORITY = 100
FIELD = "provision_layout"
STEP_ARGSINFO = {
    "layout": {"description": "The layout for this deploy: a native layout (JSON object) or "
                              "the name of a file NAME.json in [provision_agent]layouts_dir "
                              "on the conductor.",
               "required": True},
}
PROPERTIES = {
    FIELD: "The node's default layout: a native layout (JSON) or the name of one in "
           "[provision_agent]layouts_dir. Used when neither instance_info/provision_layout nor "
           "a deploy template's set_layout step gives one. Optional.",
}


@dataclass
class Choice:
    source: str          # where it came from, e.g. "driver_info/provision_layout"
    name: str | None     # the layout's name when it was given by name
    layout: dict | None  # None: Ironic's classic layout

    def describe(self):
        if self.layout is None:
            return "Ironic's classic layout (no provision_layout anywhere)"
        return self.source + (f" (named layout {self.name!r})" if self.name else "")


_invalid = named_layouts.invalid
load_named = named_layouts.load_named
resolve = named_layouts.resolve


def check_images(choice, allowed):
    """A layout the deployer did not give with this deploy must not replace its image."""
    if choice.layout is None or not choice.layout.get("images"):
        return
    if choice.source == "instance_info/" + FIELD or allowed:
        return
    raise _invalid(choice.describe(), "the layout names its own images, which would be "
                   "written instead of the image this deploy asks for (instance_info/"
                   "image_source). Remove `images` from the layout (the deploy's image then "
                   "goes where the layout mounts /), or set [provision_agent]layout_images "
                   "on the conductors if layouts are meant to choose the image")


def _given(value):
    return value not in (None, "", {})


RECORDED = object()


def choose(node, step=RECORDED):
    """The layout of this deploy.

    step: for validate(), (where, raw value) of the set_layout step's argument, or None when
    no template runs it; by default the layout the step recorded when it ran in this deploy.
    """
    info = node.instance_info or {}
    if _given(info.get(FIELD)):
        where = "instance_info/" + FIELD
        return Choice(where, *resolve(info[FIELD], where))
    if step is RECORDED:
        rec = (node.driver_internal_info or {}).get(STEP_KEY)
        if rec:
            return _recorded(node, rec)
    elif step is not None and _given(step[1]):
        return Choice(step[0], *resolve(step[1], step[0]))
    members = (node.driver_internal_info or {}).get(RAID_MEMBERS_KEY)
    if members and node.raid_config:
        where = "node raid_config (raid.create_configuration)"
        picked = (node.driver_internal_info or {}).get(RAID_PICKED_KEY, True)
        return Choice(where, None, raid_choice(node, node.raid_config, members, where, picked))
    dinfo = node.driver_info or {}
    if _given(dinfo.get(FIELD)):
        where = "driver_info/" + FIELD
        return Choice(where, *resolve(dinfo[FIELD], where))
    return Choice("classic", None, None)


def step_choice(node, step=RECORDED):
    """The layout the deploy template's (or the deploy request's) step chooses, whether or not
    it is the one this deploy gets (instance_info's comes first); None without such a step.
    step: as for choose()."""
    if step is RECORDED:
        rec = (node.driver_internal_info or {}).get(STEP_KEY)
        return _recorded(node, rec) if rec else None
    if step is not None and _given(step[1]):
        return Choice(step[0], *resolve(step[1], step[0]))
    return None


def record_step(node, value):
    """What the set_layout step does: resolve its argument now and keep it for this deploy."""
    where = f"deploy step deploy.{STEP}"
    _check_step_order(node, STEP, where)
    name, layout = resolve(value, where)
    node.set_driver_internal_info(STEP_KEY, {"source": where, "name": name,
                                             "sha256": digest(layout)})
    return Choice(where, name, layout)


def record_raid_step(task, raid_config):
    """What raid.apply_configuration does as a deploy step: this deploy's layout is the
    software RAID raid_config describes."""
    node = task.node
    where = f"deploy step raid.{RAID_STEP}"
    _check_step_order(node, RAID_STEP, where, interface="raid")
    try:
        disks = raid_layout.logical_disks(raid_config, "raid_config")
        members = raid_layout.member_hints(disks, _inventory(task), skip_hints(node),
                                           "raid_config")
    except raid_layout.Refused as exc:
        raise exception.InstanceDeployFailure(f"{where}: {exc}")
    layout = raid_choice(node, raid_config, members, where, raid_layout.from_inventory(disks))
    node.set_driver_internal_info(STEP_KEY, {"source": where, "name": None,
                                             "sha256": digest(layout), "layout": layout})
    return Choice(where, None, layout)


def raid_choice(node, raid_config, members, where, picked):
    """The layout a software RAID configuration makes for this node's deploy. picked: the
    members were taken from the inventory (raid_layout.from_inventory)."""
    from ironic_driver.document import contract
    info = node.instance_info or {}
    caps = info.get("capabilities")
    label = caps.get("disk_label") if isinstance(caps, dict) else None
    try:
        return raid_layout.build(raid_config, members, contract.boot_mode_of(node),
                                 label if label in ("gpt", "msdos") else "gpt",
                                 info.get("image_fs_type") or "ext4", where, picked)
    except raid_layout.Refused as exc:
        raise _invalid(where, str(exc))


def _inventory(task):
    from ironic_driver.document import inventory
    return inventory.stored_disks(task)


def skip_hints(node):
    """The node's skip_block_devices: the disks an erase leaves alone, and arrays too."""
    return (node.properties or {}).get("skip_block_devices")


def _check_step_order(node, name, where, interface="deploy"):
    """The step must run before the deploy step hands the ramdisk its layout, and be the only
    one choosing it."""
    for step in (node.driver_internal_info or {}).get("deploy_steps") or []:
        # validate() only sees templates: steps given with `baremetal node deploy
        # --deploy-steps` are first checked here, when provision may already have run.
        if (step.get("interface"), step.get("step")) == (interface, name) \
                and step.get("priority", 0) <= DEPLOY_STEP_PRIORITY:
            raise exception.InstanceDeployFailure(
                f"{where} ran with priority {step.get('priority')}, after the deploy step "
                f"(priority {DEPLOY_STEP_PRIORITY}) had already handed the ramdisk its layout; "
                f"give it a priority above {DEPLOY_STEP_PRIORITY}")
    earlier = (node.driver_internal_info or {}).get(STEP_KEY)
    if earlier:
        raise exception.InstanceDeployFailure(
            f"{where}: this deploy's layout was already chosen by {earlier['source']}; one "
            "deploy takes one of set_layout and raid.apply_configuration")


def digest(layout):
    return hashlib.sha256(json.dumps(layout, sort_keys=True).encode()).hexdigest()


def _recorded(node, rec):
    """The layout the set_layout step checked, read again from where it came from."""
    where = rec["source"]
    if rec.get("layout"):
        return Choice(where, None, rec["layout"])   # built from a raid_config: no secrets
    if rec.get("name"):
        layout = load_named(rec["name"], where)
        if digest(layout) != rec.get("sha256"):
            raise exception.InstanceDeployFailure(
                f"{where}: layout file {rec['name']!r} changed since the step checked it "
                "earlier in this deploy; deploy again")
        return Choice(where, rec["name"], layout)
    for step in (node.driver_internal_info or {}).get("deploy_steps") or []:
        if (step.get("interface"), step.get("step")) != ("deploy", STEP):
            continue
        name, layout = resolve((step.get("args") or {}).get("layout"), where)
        if name is None and digest(layout) == rec.get("sha256"):
            return Choice(where, None, layout)
    raise exception.InstanceDeployFailure(
        f"{where}: the layout the step chose is no longer among this deploy's steps (the "
        "deploy ended, or its steps changed); deploy again")


def forget(node):
    node.del_driver_internal_info(STEP_KEY)


def template_step(task):
    """(where, layout or layout argument) of the layout-choosing step (set_layout, or
    raid.apply_configuration with its raid_config built into a layout) in the deploy
    templates that match the instance's traits, or None. Refuses an order in which the step
    would run too late, and two such steps."""
    from ironic.objects import deploy_template
    traits = (task.node.instance_info or {}).get("traits")
    if not isinstance(traits, list):
        return None     # malformed traits are Ironic's to refuse (validate_instance_info_traits)
    traits = [t for t in traits if isinstance(t, str)]
    if not traits:
        return None
    found = []
    for template in deploy_template.DeployTemplate.list_by_names(task.context, traits):
        for step in template.steps:
            kind = (step["interface"], step["step"])
            if kind not in (("deploy", STEP), ("raid", RAID_STEP)) or step["priority"] <= 0:
                continue     # priority 0 disables a step: Ironic will not run it
            where = f"deploy template {template.name} (step {kind[0]}.{kind[1]})"
            if step["priority"] <= DEPLOY_STEP_PRIORITY:
                raise _invalid(where, f"priority {step['priority']} runs after the deploy step "
                                      f"(priority {DEPLOY_STEP_PRIORITY}) has already handed "
                                      f"the layout to the ramdisk; give it a priority above "
                                      f"{DEPLOY_STEP_PRIORITY}")
            args = step.get("args") or {}
            if kind[0] == "raid":
                found.append((where, _template_raid(task, args.get("raid_config"), where)))
            else:
                found.append((where, args.get("layout")))
    if len(found) > 1:
        raise _invalid(found[1][0], f"chooses the layout as {found[0][0]} does; one deploy "
                                    "takes one of set_layout and raid.apply_configuration")
    return found[0] if found else None


def _template_raid(task, raid_config, where):
    try:
        disks = raid_layout.logical_disks(raid_config, "raid_config")
        members = raid_layout.member_hints(disks, _inventory(task), skip_hints(task.node),
                                           "raid_config")
    except raid_layout.Refused as exc:
        raise _invalid(where, str(exc))
    return raid_choice(task.node, raid_config, members, where, raid_layout.from_inventory(disks))
