"""The executor's steps for what a layout keeps in place: a kept md array assembled (checked
again first: the tables were edited since the preflight), a kept partition's or array's
contents given up (wipe)."""

from provision_agent.drivers import blockinfo, md, udev, wipe
from provision_agent.errors import MachineMismatch, Problem


def handlers(executor):
    """kind -> handler(step) for the executor's table."""
    return {"md_assemble": lambda step: assemble(executor, step),
            "wipe_contents": lambda step: wipe.wipe_contents(executor.runner, step.device,
                                                             step.how)}


def assemble(executor, step):
    runner = executor.runner
    problems = md.kept_array_problems(runner, step.args)
    if problems:
        raise MachineMismatch([Problem(f"raid {step.name}", p) for p in problems])
    members = step.members + list(step.spares or [])
    udev.settle(runner)         # udev's incremental assembly of the members, done before it is read
    active = []
    for node in blockinfo.trees(runner, members):
        active += [n["path"] for n in blockinfo.descendants(node)
                   if n.get("type", "").startswith("raid") or n.get("type") == "md"]
    md.assemble(runner, step.args, list(dict.fromkeys(active)))
    udev.settle(runner)
    udev.wait_for_devices(runner, [step.device])
    executor.kept.add(step.device)
    return {"kept": step.device}
