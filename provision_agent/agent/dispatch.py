"""provision-dispatch: the one program the conductor's SSH key may run in the ramdisk.

The conductor's authorized_keys line is `restrict,command="provision-dispatch [OPTIONS]"`:
sshd runs this program whatever the client asked for, with the request in
SSH_ORIGINAL_COMMAND (a shell, an SFTP subsystem, a port forward: `restrict` refuses the
forwards and the pty, and everything else arrives here). The request is split with shlex (no
shell ever sees it); its first word names a registered command (ramdisk_commands.py, and the
stevedore namespace `provision_agent.ramdisk_commands` for plug-ins); the rest are arguments,
`--name=value` options and positionals, checked against that command's JSON schema before
anything runs. Anything else is refused with exit code 126 and one line on stderr saying why.

Every request, run or refused, is one JSON line in --log_file with the node(s) this ramdisk
is bound to (the binding files' names in --binding_dir): what a key did, and to which node.
"""

import argparse
import datetime
import json
import os
import re
import shlex
import sys

import jsonschema

from provision_agent import binding
from provision_agent.agent import ramdisk_commands, update
from provision_agent.agent.ramdisk_commands import Command  # noqa: F401  (plug-ins use it)

REFUSED = 126
NAMESPACE = "provision_agent.ramdisk_commands"
MAX_REQUEST_CHARS = 4096
LOGGED_CHARS = 400
LOG_FILE = "/var/log/provision-dispatch.log"
INTEGER_RE = re.compile(r"-?[0-9]{1,15}")


class Refused(Exception):
    """The request is not a registered command with arguments its schema accepts."""


def registry(extra=True):
    """name -> Command: the built-in commands, then those plug-ins register (a plug-in cannot
    replace a built-in one)."""
    commands = {c.name: c for c in ramdisk_commands.BUILT_IN}
    if extra:
        for command in _plugin_commands():
            commands.setdefault(command.name, command)
    return commands


def _plugin_commands():
    from stevedore import extension
    manager = extension.ExtensionManager(NAMESPACE, invoke_on_load=False,
                                         on_load_failure_callback=_plugin_failed)
    return [ext.plugin for ext in manager if isinstance(ext.plugin, Command)]


def _plugin_failed(manager, entry_point, exc):
    print(f"provision-dispatch: plug-in command {entry_point.name} not loaded: {exc}",
          file=sys.stderr)


def parse(request, commands):
    """(Command, args) for the request line, or Refused saying why."""
    if not request or not request.strip():
        raise Refused("no command given (an interactive shell is not offered)")
    if len(request) > MAX_REQUEST_CHARS:
        raise Refused(f"the request is longer than {MAX_REQUEST_CHARS} characters")
    try:
        words = shlex.split(request, comments=False, posix=True)
    except ValueError as exc:
        raise Refused(f"cannot split the request: {exc}") from None
    if not words or words[0] not in commands:
        name = words[0][:64] if words else ""
        raise Refused(f"{name!r} is not a registered command (registered: "
                      f"{', '.join(sorted(commands))})")
    command = commands[words[0]]
    args = _arguments(command, words[1:])
    try:
        jsonschema.validate(args, command.schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "arguments"
        raise Refused(f"{command.name}: {where}: {exc.message[:200]}") from None
    return command, args


def _arguments(command, words):
    props = command.schema.get("properties", {})
    args, positional = {}, list(command.positional)
    for word in words:
        if word.startswith("--"):
            name, sep, value = word[2:].partition("=")
            if not sep or name not in props or name in positional:
                raise Refused(f"{command.name}: option {word[:64]!r} is not one it takes "
                              "(options are --name=value)")
            if props[name].get("type") == "array":
                args.setdefault(name, []).append(_typed(props[name].get("items", {}), value))
                continue
            if name in args:
                raise Refused(f"{command.name}: --{name} given twice")
            args[name] = _typed(props[name], value)
        elif positional:
            name = positional.pop(0)
            args[name] = _typed(props.get(name, {}), word)
        else:
            raise Refused(f"{command.name}: extra argument {word[:64]!r}")
    return args


def _typed(schema, value):
    if schema.get("type") == "integer" and INTEGER_RE.fullmatch(value):
        return int(value)
    return value


def bound_nodes(binding_dir):
    """The nodes this ramdisk is bound to: its binding files' names (provision_agent/binding)."""
    try:
        return sorted(n for n in os.listdir(binding_dir) if binding.UUID_RE.fullmatch(n))[:8]
    except OSError:
        return []


def log(config, request, outcome, reason=""):
    record = {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
              "client": os.environ.get("SSH_CLIENT", "").split(" ")[0],
              "binding": bound_nodes(config.binding_dir),
              "request": (request or "")[:LOGGED_CHARS], "outcome": outcome}
    if reason:
        record["reason"] = reason[:LOGGED_CHARS]
    try:
        fd = os.open(config.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a") as f:
            f.write(json.dumps(record) + "\n")
    except OSError as exc:
        print(f"provision-dispatch: cannot log to {config.log_file}: {exc}", file=sys.stderr)


def options(argv):
    """The dispatcher's own configuration: the forced command line, fixed by whoever built the
    ramdisk (ramdisk/init), never by the client."""
    p = argparse.ArgumentParser(prog="provision-dispatch", description=__doc__.split("\n")[0])
    p.add_argument("--job_root", default="/run/provision-ironic",
                   help="Directory holding one job directory per node (the conductor's "
                        "[provision_agent]remote_dir).")
    p.add_argument("--binding_dir", default="/run/provision-ironic-agent",
                   help="provision-ironic-agent's --binding_dir.")
    p.add_argument("--provision", default="provision", help="The provision program.")
    p.add_argument("--provision_arg", action="append", default=[],
                   help="An argument added to every provision run (a test's --dry_run).")
    p.add_argument("--log_file", default=LOG_FILE)
    p.add_argument("--update_keys", default=update.KEYS,
                   help="allowed_signers file of the keys an update's wheel must be signed "
                        "with (ramdisk/build.sh --update-key); missing or empty: no update.")
    p.add_argument("--update_root", default=update.ROOT,
                   help="Where updates are unpacked (tmpfs); its `current` symlink is the code "
                        "the ramdisk's console scripts run.")
    p.add_argument("--cmdline_file", default="/proc/cmdline",
                   help=f"The kernel command line: {update.DISABLE} there refuses updates.")
    return p.parse_args(argv)


def main(argv=None, environ=None, stdin=None, stdout=None):
    config = options(sys.argv[1:] if argv is None else argv)
    request = (os.environ if environ is None else environ).get("SSH_ORIGINAL_COMMAND")
    commands = registry()
    config.commands = sorted(commands)
    try:
        command, args = parse(request, commands)
    except Refused as exc:
        log(config, request, "refused", str(exc))
        print(f"provision-dispatch: refused: {exc}", file=sys.stderr)
        return REFUSED
    log(config, request, "accepted")
    try:
        return command.run(args, config, stdin or sys.stdin.buffer, stdout or sys.stdout.buffer)
    except update.Refused as exc:
        log(config, request, "refused", f"{command.name}: {exc}")
        print(f"provision-dispatch: {command.name} refused: {exc}", file=sys.stderr)
        return REFUSED
    except OSError as exc:
        print(f"provision-dispatch: {command.name}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
