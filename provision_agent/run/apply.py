"""Apply a plan to the live machine: preflight (the whole-disk images' tables too), execute
the plan, report.

Imported by cli/main.py only for a real run, so that a dry run never loads the drivers (pyudev,
the tool wrappers).
"""

import logging
import os

from provision_agent import errors
from provision_agent.drivers import mount
from provision_agent.machine import disks, image_tables, preflight
from provision_agent.run import disk_watch, executor, faults
from provision_agent.run.events import Events
from provision_agent.run.runner import Runner

LOG = logging.getLogger(__name__)


# after a disk went away (and no --disk_stall_seconds says otherwise), each clean-up command
GONE_CLEANUP_SECONDS = 60


def image_options(conf):
    """Image download options from the config, where the image pipeline defines them."""
    names = ("image_ca_bundle", "image_insecure", "image_auth_token", "image_headers",
             "image_zero_target", "image_stall_seconds", "image_stall_bytes", "image_keyring")
    return {n: getattr(conf, n) for n in names if hasattr(conf, n)}


def provision(planned, conf, runner=None, live_disks=None, events=None):
    runner = runner or Runner()
    events = events or Events.from_conf(conf)
    try:
        if any(s.kind == "luks_format" for s in planned.steps) and \
                not getattr(conf, "recovery_key_file", None):
            raise errors.InputError([errors.Problem(
                "$.encrypted", "encrypted volumes need --recovery_key_file: where their "
                "recovery keys (encrypted to recovery.age_recipients) are written")])
        mount.check_target_root(runner, conf.target_root, planned.disk_names)
        released = mount.release_stale(runner, conf.target_root)
        loops = [n for n in planned.disk_names if n.startswith("/dev/loop")
                 and getattr(conf, "allow_loop_devices", False)]
        # live_disks: what the planning discovered seconds ago, unless mounts were released
        # since (their disks were in use then); a second discovery cost 0.7-0.9 s (issue 58)
        preflight.check(planned, disks.discover(runner, loops) if live_disks is None
                        or released else live_disks, runner)
        # the images' tables against their disks' sectors: read from the images' heads
        image_tables.check(planned.steps, image_options(conf), runner)
        report = _execute(planned, conf, runner, events)
    except errors.ProvisionError as exc:
        events.result("failed", exc.exit_code, str(exc)[-4000:])   # redacted by Events
        events.close()
        raise
    except Exception as exc:
        events.result("failed", errors.EXIT_UNEXPECTED, f"{type(exc).__name__}: {exc}")
        events.close()
        raise
    events.result("ok", errors.EXIT_OK, degraded_text(report))
    events.close()
    return report


def degraded_text(report):
    """What the run lost under on_member_failure: degrade, in one line ("" for nothing)."""
    return "; ".join(f"{x['array']} runs degraded: member {x['member']} (disk {x['disk']}) "
                     f"was taken out: {x['reason']}" for x in report.get("degraded", []))


def _execute(planned, conf, runner, events):
    """The plan's steps, with its disks watched: a stall fails the step running (stall_watch),
    and a step that failed because its disk went away says so."""
    run = executor.Executor(runner, events, conf.target_root, image_options(conf),
                            layout=planned.resolved,
                            faults=faults.FaultWatch(runner, events, planned.disk_names))
    with stall_watch(planned, conf, runner) as watch:
        try:
            return run.execute(planned.steps)
        except (errors.CommandError, errors.ImageError) as exc:
            gone = watch.gone()
            if not gone:
                raise
            raise errors.DiskGone(
                f"{run.failed_step or 'the run'}: disk {', '.join(gone)} went away (removed "
                f"from the machine, or its controller lost it): {exc}") from exc


def stall_watch(planned, conf, runner):
    """The plan's disks watched while it runs: a stall fails the running step through
    runner.abort() and bounds each clean-up command after it by the same seconds."""
    seconds = getattr(conf, "disk_stall_seconds", 0) or 0

    def on_stall(disk, in_flight):
        runner.abort(errors.DiskStalled(
            f"disk {disk} stopped answering: {in_flight} requests in flight and none "
            f"finished for {seconds} s (--disk_stall_seconds); nothing more is written to it"),
            after_fault=seconds)

    # their kernel names now: a by-id link is gone with its disk
    knames = {d: faults.kernel_name(d) for d in planned.disk_names}

    def on_gone(disk):
        runner.abort(errors.DiskGone(faults.gone_text(disk, knames[disk])),
                     after_fault=seconds or GONE_CLEANUP_SECONDS)
    return disk_watch.DiskWatch(planned.disk_names, seconds, on_stall, on_gone=on_gone)


def save_recovery_keys(path, keys):
    """The recovery keys' ciphertexts, root-only: the one place they are written."""
    import json
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(keys, f, indent=2)
        f.write("\n")
    LOG.info("recovery keys of %s written to %s (encrypted to the layout's age recipients)",
             ", ".join(k["name"] for k in keys), path)


def summary(report):
    lines = [f"provisioned in {report['seconds']}s, {len(report['steps'])} steps"]
    for fs in report["filesystems"]:
        lines.append(f"  {fs['device']}: {fs['fs_type']} UUID={fs['uuid']}"
                     + (f" LABEL={fs['label']}" if fs.get("label") else ""))
    lost = degraded_text(report)
    if lost:
        lines.append(f"  DEGRADED: {lost}")
    for step in report["steps"]:
        if step["kind"] == "write_image" and step["result"]:
            r = step["result"]
            lines.append(f"  image: {r.get('bytes_written')} bytes at {r.get('mb_per_s')} MB/s")
    return "\n".join(lines)
