"""Turning argv into parsed options, with errors a person can act on.

oslo.config spells options with underscores and reports bad values its own way (an unprefixed
line on stderr and exit 1, or the whole usage for an unknown option). Operators type
`--dry-run` out of habit and scripts read our exit codes, so: the hyphen spelling of a known
option is accepted, and every option error is one `provision: error:` line with exit 2.
"""

import contextlib
import difflib
import io
import re

from oslo_config import cfg

from provision_agent.cli import config

SUBCOMMANDS = ("run", "validate", "inventory", "erase", "plan-schema", "steps", "step")
USAGE = ("provision [run|validate|inventory|erase|plan-schema|steps|step] "
         "[--input_data_file F | --input_data_url URL] [--dry_run] [options]   "
         "(provision --help lists every option)")

# oslo.config writes this for a value its type refuses, then exits 1.
_INVALID_VALUE = re.compile(r"argument --(\w+): Invalid .*? value: (.*)")
_UNRECOGNIZED = "unrecognized arguments: "


class UsageError(Exception):
    """A command line that cannot be parsed; the message is for the person who typed it."""


def option_names():
    names = {opt.dest for opt in config.cli_opts + config.logging_cli_opts}
    names |= {"config_file", "config_dir", "help", "version"}
    return names


def normalise(argv, names):
    """`--dry-run` → `--dry_run` (and `--nodry-run`) for the options we know; else as given."""
    out = []
    for arg in argv:
        if arg == "--":
            out.append(arg)
            out.extend(argv[len(out):])
            break
        if arg.startswith("--") and "-" in arg[2:]:
            flag, eq, value = arg[2:].partition("=")
            underscored = flag.replace("-", "_")
            bare = underscored[2:] if underscored.startswith("no") else underscored
            # config_file/config_dir are oslo's own and spelled with hyphens.
            if (underscored in names or bare in names) and bare not in (
                    "config_file", "config_dir"):
                arg = "--" + underscored + eq + value
        out.append(arg)
    return out


def split_command(argv):
    if argv and argv[0] in SUBCOMMANDS:
        return argv[0], list(argv[1:])
    return "run", list(argv)


def _suggest(unknown, names):
    hints = []
    for arg in unknown.split():
        if not arg.startswith("-"):
            continue
        flag = arg.lstrip("-").split("=")[0].replace("-", "_")
        close = difflib.get_close_matches(flag, sorted(names), n=1, cutoff=0.6)
        if close:
            hints.append(f"{arg}: did you mean --{close[0]}?")
    return hints


def _explain(text, names):
    """One sentence from what argparse/oslo.config printed before exiting."""
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    for line in lines:
        m = _INVALID_VALUE.search(line)
        if m:
            opt = next((o for o in config.cli_opts + config.logging_cli_opts
                        if o.dest == m.group(1)), None)
            choices = getattr(getattr(opt, "type", None), "choices", None)
            accepted = f"; accepted: {', '.join(choices)}" if choices else ""
            return f"--{m.group(1)}: {m.group(2)!r} is not a valid value{accepted}"
    last = lines[-1] if lines else "cannot parse the command line"
    message = last.split("error: ", 1)[-1]
    if message.startswith(_UNRECOGNIZED):
        hints = _suggest(message[len(_UNRECOGNIZED):], names)
        if hints:
            message += " (" + "; ".join(hints) + ")"
    return message


def parse(argv, conf, *, description, epilog, version):
    """Parse into conf; returns the subcommand. Raises UsageError with a one-line reason."""
    command, argv = split_command(argv)
    names = option_names()
    argv = normalise(argv, names)
    config.register(conf)
    if "--help" in argv or "-h" in argv:
        with _help_names_data_drivers(conf):
            conf(argv, project="provision-agent", prog="provision", version=version,
                 usage=USAGE, default_config_files=[], description=description,
                 epilog=epilog)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            conf(argv, project="provision-agent", prog="provision", version=version,
                 usage=USAGE, default_config_files=[], description=description,
                 epilog=epilog)
    except SystemExit as exc:
        if not exc.code:      # --help, --version: oslo/argparse already printed it
            raise
        raise UsageError(_explain(captured.getvalue(), names)) from None
    except cfg.Error as exc:
        raise UsageError(str(exc)) from None
    _check_values(conf)
    if command == "erase" and conf.allow_loop_devices:
        raise UsageError("'erase' never clears loop devices; --allow_loop_devices is for run "
                         "and validate on a developer's machine")
    if command == "erase" and conf.inventory_file:
        raise UsageError("'erase' works on this machine's own disks; --inventory_file cannot "
                         "stand in for them")
    if command in ("step", "steps") and conf.allow_loop_devices:
        raise UsageError(f"{command!r} never takes loop devices; --allow_loop_devices is for "
                         "run and validate on a developer's machine")
    if command == "step" and conf.inventory_file:
        raise UsageError("'step' runs on this machine's own hardware; --inventory_file cannot "
                         "stand in for it (it can for 'steps', which only lists)")
    if command == "inventory" and conf.inventory_file:
        raise UsageError("'inventory' describes this machine's own disks; --inventory_file is "
                         "for planning against a recorded inventory (with run or validate)")
    return command


@contextlib.contextmanager
def _help_names_data_drivers(conf):
    """--help lists the data drivers installed here, a site's own too (a scan of every
    package's entry points: only for --help, never on a run); the option's own help is put
    back afterwards (the sample config and docs/cli.md are made from it)."""
    from provision_agent.plan import pipeline
    names = sorted(set(pipeline.BUILTIN_DATA_DRIVERS) | set(pipeline.data_driver_names()))
    opt = next(o for o in config.cli_opts if o.dest == "data_driver")
    before = opt.help
    opt.help = f"{before} Installed here: {', '.join(names)}."
    try:
        yield
    finally:
        opt.help = before


def _check_values(conf):
    # A bad value from a --config-file is only noticed when the option is read: read them all
    # now, so that it is an option error here and not an "unexpected error" mid-run.
    for opt in config.cli_opts + config.logging_cli_opts:
        try:
            getattr(conf, opt.dest)
        except (cfg.Error, ValueError) as exc:
            raise UsageError(f"--{opt.dest}: {exc}") from None
