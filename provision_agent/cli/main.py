"""`provision`: the command operators and the Ironic driver run.

    provision --input_data_file F [--dry_run]     validate, plan, and (without --dry_run) provision
    provision validate --input_data_file F        only say whether the input fits this machine
    provision inventory                           print this machine's disks (IPA inventory format)
    provision erase [--input_data_file F]         clear this machine's disks (metadata, or whole)
    provision plan-schema                         the JSON plan's schema with the installed
                                                  plug-ins' steps
    provision steps                               the Ironic steps hardware plug-ins offer here
    provision step --input_data_file F            run one of them: {"step", "type", "args"}
"""

import importlib.metadata
import json
import logging
import os
import signal
import sys
import traceback

from oslo_config import cfg

from provision_agent import errors, redact
from provision_agent.cli import args as cli_args
from provision_agent.cli import input_source, outcome
from provision_agent.drivers import target
from provision_agent.plan import existing, inventory, pipeline, render

LOG = logging.getLogger("provision")

DESCRIPTION = (
    "Provision this machine's disks from a JSON description: partitions, MD RAID, LVM, "
    "filesystems, images, bootloader and configdrive. Everything is validated and planned "
    "before the first byte is written. Subcommands (optional, first argument): 'run' (the "
    "default) provisions; 'validate' checks the input against the machine and exits; "
    "'inventory' prints this machine's disks as JSON in ironic-python-agent's format; "
    "'plan-schema' prints the JSON plan's schema: plan-v1.json with the steps of the "
    "installed plug-ins; "
    "'steps' prints the Ironic clean, deploy and service steps the installed hardware "
    "plug-ins offer on this machine (JSON); 'step' runs one, named by an input "
    "{\"step\": NAME, \"type\": \"clean\", \"args\": {...}}; "
    "'erase' clears the partition tables, md superblocks, LVM labels and filesystem signatures "
    "of every disk provision may touch (read-only, removable, in-use disks and the boot medium "
    "are left alone, and those an input {\"skip_block_devices\": [hints]} names), as Ironic's "
    "cleaning does between tenants; with --dry_run it only lists them. An input "
    "{\"method\": \"full\"} then erases each whole disk by the strongest method it offers "
    "(NVMe Format NVM with secure erase, ATA security erase, a discard that reads back as "
    "zeros, else an overwrite of \"overwrite_passes\" passes); \"express\" stops before the "
    "overwrite, as ironic-python-agent's erase_devices_express does.")

EPILOG = (
    "Examples: provision --input_data_file layout.json --dry_run ; "
    "provision --input_data_file layout.json --inventory_file inventory.json --dry_run "
    "--plan_format json ; provision --data_driver nailgun --input_data_file provision.json ; "
    "provision inventory > inventory.json. Exit codes: "
    + "; ".join(f"{code} {text}" for code, text in errors.EXIT_CODES.items())
    + ". Tracebacks are shown only with --debug.")


def setup_logging(debug, log_file):
    root = logging.getLogger()
    root.handlers[:] = []
    root.setLevel(logging.DEBUG if debug or log_file else logging.INFO)
    fmt = redact.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.DEBUG if debug else logging.INFO)
    console.setFormatter(fmt)
    root.addHandler(console)
    if log_file:
        fh = logging.FileHandler(log_file)
        fh.setLevel(logging.DEBUG)
        fh.setFormatter(fmt)
        root.addHandler(fh)
    for noisy in ("stevedore", "urllib3", "ironic_lib"):
        logging.getLogger(noisy).setLevel(logging.WARNING if not debug else logging.DEBUG)


def version():
    try:
        return importlib.metadata.version("provision-agent")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


def parse_args(argv, conf):
    # The installed version is looked up (a scan of every installed package's metadata,
    # 0.2-0.4 s in the emulated ramdisk) only when an argument could be --version or an
    # abbreviation of it, not on every run (issue 58).
    asked = any(a.startswith("--v") for a in argv)
    return cli_args.parse(argv, conf, description=DESCRIPTION, epilog=EPILOG,
                          version=version() if asked else "unknown (not looked up)")


def machine_disks(conf, layout=None):
    if conf.inventory_file:
        return inventory.load(conf.inventory_file)
    if layout is not None and any(d.iscsi for d in layout.disks):
        _iscsi_login(layout)
    return _live_disks(loops(conf, layout))


def loops(conf, layout):
    """The loop devices the layout names, with --allow_loop_devices; else none."""
    if not getattr(conf, "allow_loop_devices", False) or layout is None:
        return ()
    from provision_agent.plan import loops as named
    return named.named_loops(layout)


# What the real run's preflight checks and only the live machine can answer.
LIVE_ONLY_CHECKS = ("disks in use (mounted or swap)", "read-only disks",
                    "kept partitions as they are on disk", "volume group and md array names "
                    "held on disks the plan does not name", "arrays and volume groups that "
                    "also stand on disks the plan does not name")


def check_live(planned, conf, disks):
    """Refuse in validate and dry runs what the real run would refuse before its first write,
    so that 'valid' and a printed plan never promise a run that cannot happen."""
    if conf.inventory_file:
        LOG.info("planned against the recorded inventory %s: these checks need the live "
                    "machine and were not run: %s", conf.inventory_file,
                    "; ".join(LIVE_ONLY_CHECKS))
        return
    from provision_agent.drivers import blockinfo, mount
    from provision_agent.machine import preflight  # the drivers: only on the live machine
    from provision_agent.run.runner import Runner
    mount.check_target_root(Runner(), conf.target_root, planned.disk_names)
    # The real run first releases what an interrupted run left mounted under the target root;
    # a dry run must not unmount anything, so it only leaves those mounts out of the check.
    root = os.path.realpath(conf.target_root)
    mounted = {src: where for src, where in blockinfo.mounted_sources().items()
               if os.path.commonpath([root, os.path.realpath(where)]) != root}
    preflight.check(planned, disks, Runner(), mounted=mounted)


def run_erase(conf):
    from provision_agent.run import erase
    from provision_agent.run.events import Events
    from provision_agent.run.runner import Runner
    document = None
    if conf.input_data_file or conf.input_data_url:
        document = input_source.read_input(conf.input_data_file, conf.input_data_url,
                                       ca_bundle=conf.input_data_ca_bundle,
                                       insecure=conf.input_data_insecure)
    if conf.dry_run:
        from provision_agent.drivers import blockinfo
        runner = Runner()
        chosen, skipped = erase.choose(_live_disks(), erase.skip_hints(document), runner,
                                       blockinfo.mounted_sources(), blockinfo.active_swaps())
        print("\n".join([f"erase {name}" for name in chosen]
                        + [f"leave {name} alone: {why}" for name, why in skipped]))
        return errors.EXIT_OK
    events = Events.from_conf(conf)
    with outcome.reported(events):
        report = erase.erase(document, Runner(), events)
    print(json.dumps(report, indent=2) if conf.plan_format == "json" else
          f"erased the metadata of {len(report['erased'])} disk(s): "
          f"{', '.join(report['erased']) or 'none'}"
          + "".join(f"\nleft alone: {name}: {why}" for name, why in report["skipped"]))
    return errors.EXIT_OK


def run(command, conf):
    if command in ("inventory", "steps", "step"):
        from provision_agent.cli import hardware_commands
        return getattr(hardware_commands, f"run_{command}")(conf)
    if command == "erase":
        return run_erase(conf)
    if command == "plan-schema":
        from provision_agent.plan import plan_schema
        print(json.dumps(plan_schema.composed(), indent=1))
        return errors.EXIT_OK
    # the real run's refusal, before anything: a dry run or 'valid' must not promise a run
    # that stops at its target root
    target.check_root_path(conf.target_root)
    document = input_source.read_input(conf.input_data_file, conf.input_data_url,
                                       ca_bundle=conf.input_data_ca_bundle,
                                       insecure=conf.input_data_insecure,
                                       yaml=pipeline.input_format(conf.data_driver) == "yaml")
    layout = pipeline.load_layout(document, conf.data_driver)
    disks = machine_disks(conf, layout)
    if not conf.inventory_file and existing.needed(layout):
        disks = _live_tables(disks)
    planned = pipeline.build_plan(layout, disks, keyring=bool(conf.image_keyring))
    if command == "validate" or conf.dry_run:
        check_live(planned, conf, disks)
    if command == "validate":
        print(f"valid: {len(planned.steps)} steps planned")
        return errors.EXIT_OK
    if conf.dry_run:
        print(render.plan_json(planned) if conf.plan_format == "json"
              else render.plan_text(planned))
        return errors.EXIT_OK
    LOG.info("plan:\n%s", render.plan_text(planned))
    from provision_agent.run import apply  # needs the drivers; a dry run does not
    # the disks the plan was made against, discovered live moments ago (not an inventory)
    report = apply.provision(planned, conf,
                             live_disks=None if conf.inventory_file else disks)
    keys = report.pop("recovery_keys", None)
    if keys:
        apply.save_recovery_keys(conf.recovery_key_file, keys)
    # the report carries the steps' descriptions and results: a plug-in's secret value too
    print(redact.text(json.dumps(report, indent=2) if conf.plan_format == "json"
                      else apply.summary(report)))
    return errors.EXIT_OK


def _interrupt(signum, frame):
    # SIGTERM unwinds like Ctrl-C so that the executor still unmounts the target.
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGTERM, _interrupt)
    conf = cfg.ConfigOpts()
    if not argv:
        print(f"usage: {cli_args.USAGE}\nprovision: error: give the input with "
              "--input_data_file or --input_data_url", file=sys.stderr)
        return errors.EXIT_INVALID_INPUT
    try:
        command = parse_args(argv, conf)
    except cli_args.UsageError as exc:
        print(f"provision: error: {exc}\nusage: {cli_args.USAGE}", file=sys.stderr)
        return errors.EXIT_INVALID_INPUT
    setup_logging(conf.debug, conf.log_file)
    try:
        return run(command, conf)
    except errors.ProvisionError as exc:
        LOG.debug("failure", exc_info=True)
        if conf.debug:
            print(redact.text(traceback.format_exc()), file=sys.stderr, end="")
        print(f"provision: error: {redact.text(str(exc))}", file=sys.stderr)
        if isinstance(exc, (errors.DiskStalled, errors.DiskGone)):
            _leave(exc.exit_code)
        return exc.exit_code
    except KeyboardInterrupt:
        print("provision: interrupted", file=sys.stderr)
        return errors.EXIT_UNEXPECTED
    except Exception as exc:
        LOG.debug("unexpected failure", exc_info=True)
        if conf.debug:
            print(redact.text(traceback.format_exc()), file=sys.stderr, end="")
        print(f"provision: unexpected error: {type(exc).__name__}: {redact.text(str(exc))} "
              "(run with --debug for a traceback)", file=sys.stderr)
        return errors.EXIT_UNEXPECTED


def _leave(code):
    """Exit now, without the interpreter's join of the image writer's threads: one may wait
    in the kernel on the disk that stopped answering, and would hold the exit forever. (The
    kernel still holds the process until that write returns or fails: the exit code comes
    then; the events' result and the message above are out already.)"""
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())


def _live_tables(disks):
    from provision_agent.machine import disks as live  # the drivers: a live machine only
    from provision_agent.run.runner import Runner
    return live.with_tables(disks, Runner())


def _iscsi_login(layout):
    """The layout's iSCSI LUNs logged in to, so that discovery sees them (a dry run too: it
    writes nothing to any disk, and without the login could not find them)."""
    from provision_agent.drivers import iscsi
    from provision_agent.run.runner import Runner
    for disk_id, link in iscsi.log_in_all(Runner(), layout).items():
        LOG.info("iSCSI disk %s: logged in, %s", disk_id, link)


def _live_disks(loops=()):
    from provision_agent.machine import disks  # pyudev and the drivers: a live machine only
    from provision_agent.run.runner import Runner
    return disks.discover(Runner(), loops)
