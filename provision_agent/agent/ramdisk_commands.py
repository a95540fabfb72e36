"""The commands provision-dispatch runs for the conductor (protocol PROTOCOL), each with the
schema of its arguments. They do what the conductor did in a shell before (ironic_driver/
conversation/remote.py): the same job directory, the same files, the same wrapper events.

    version                                 {"provision": ..., "protocol": N, "commands": [...]}
    start KIND NODE JOB [--data_driver=D] [--flag=F]... [--keyring=1]   KIND: provision, erase,
                                            steps or step (provision's subcommands)
                                            stdin: the input document; prints started, or
                                            provision-already-running / -finished
    keyring NODE JOB                        stdin: the image keyring, kept for the next start
    read NODE FILE OFFSET LIMIT             bytes of one job file (a negative OFFSET: the tail);
                                            exit 3 when the file does not exist
    binding NODE                            the binding file provision-ironic-agent wrote
    cancel NODE                             SIGTERM to the running provision's process group
    inventory                               `provision inventory`'s output
    poweroff                                sync and power off
    update SIGNATURE                        stdin: a signed wheel of a newer provision-agent,
                                            made current in place (update.py); refused when
                                            the ramdisk has no update key or says
                                            provision.update=off ("update" in version's answer)

`version` and `update` keep their arguments and answers in every protocol, so that a conductor
can always tell what a ramdisk runs and update one that speaks an older protocol.
"""

import dataclasses
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess

from provision_agent import binding
from provision_agent.agent import update

PROTOCOL = 1
# JSON schema patterns search, and `$` also matches before a final newline: the lengths close
# that ("NODE\n" would be a path in the job root otherwise).
NODE = {"type": "string", "pattern": "^" + binding.UUID_RE.pattern + "$", "maxLength": 36}
JOB = {"type": "string", "pattern": "^[0-9a-f]{32}$", "maxLength": 32}
FILES = ("exit_code", "events.jsonl", "output.log", "provision.log", "recovery-keys.json")
JOB_FILES = ("input.json", "keyring.pgp", "events.jsonl", "provision.log", "output.log",
             "exit_code", "exit_code.tmp", "job", "recovery-keys.json")
MAX_READ = 1024 * 1024
MAX_STDIN = {"start": 16 * 1024 * 1024, "keyring": 1024 * 1024}
FLAGS = ("--dry_run",)
RUNNING = "provision-already-running"
FINISHED = "provision-already-finished"
MISSING = 3


@dataclasses.dataclass(frozen=True)
class Command:
    """A registered command: run(args, config, stdin, stdout) -> exit code. schema: the JSON
    schema of args (an object; its properties are the positionals in `positional` order and
    the `--name=value` options; an option of type array may repeat). What a command writes to
    stdout goes to the conductor."""
    name: str
    run: object
    schema: dict
    positional: tuple = ()
    help: str = ""


def _schema(props, required=None):
    return {"type": "object", "properties": props, "additionalProperties": False,
            "required": list(props) if required is None else required}


def version():
    try:
        return importlib.metadata.version("provision-agent")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def _version(args, config, stdin, stdout):
    answer = {"provision": version(), "protocol": PROTOCOL,
              "commands": getattr(config, "commands", []), "update": update.state(config)}
    stdout.write((json.dumps(answer) + "\n").encode())
    return 0


def job_dir(config, node):
    return os.path.join(config.job_root, node)


def _bounded_stdin(stdin, limit, what):
    data = stdin.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"{what} on stdin is larger than {limit} bytes")
    return data


def _prepare(directory, job, keep=()):
    """None when the directory is ready for a new run; RUNNING or FINISHED otherwise
    (remote.prepare_command's rules: a running provision holds the lock; the same job's exit
    code means it already ran)."""
    import fcntl
    os.makedirs(directory, mode=0o700, exist_ok=True)
    with open(os.path.join(directory, "lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return RUNNING
    try:
        with open(os.path.join(directory, "job")) as f:
            same = f.read(64) == job
        if same and os.path.getsize(os.path.join(directory, "exit_code")) > 0:
            return FINISHED
    except OSError:
        pass
    for name in JOB_FILES:
        if name not in keep:
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass
    return None


def _write(path, data):
    fd = os.open(path + ".part", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(path + ".part", path)


def provision_argv(args, config, directory):
    # erase, steps, step: provision's subcommands of those names (cli/main.py)
    argv = [config.provision] + ([args["kind"]] if args["kind"] != "provision" else [])
    if args.get("data_driver"):
        argv += ["--data_driver", args["data_driver"]]
    argv += list(config.provision_arg) + list(args.get("flag", []))
    path = lambda name: os.path.join(directory, name)  # noqa: E731
    argv += ["--input_data_file", path("input.json"), "--events_file", path("events.jsonl"),
             "--log_file", path("provision.log")]
    if args["kind"] == "provision":
        argv += ["--recovery_key_file", path("recovery-keys.json")]
    if args.get("keyring") == "1":
        argv += ["--image_keyring", path("keyring.pgp")]
    return argv


# The wrapper's two events bracket provision's (remote.py): sh gets provision's argv as its
# positional parameters, never as text to parse.
WRAPPER = ('printf \'{"event": "wrapper", "status": "started", "pid": %d}\\n\' $$ >>events.jsonl; '
           '"$@" >output.log 2>&1; rc=$?; '
           'printf \'{"event": "wrapper", "status": "exited", "exit_code": %d}\\n\' $rc '
           '>>events.jsonl; echo $rc >exit_code.tmp && mv exit_code.tmp exit_code')


def _start(args, config, stdin, stdout):
    document = _bounded_stdin(stdin, MAX_STDIN["start"], "the input document")
    directory = job_dir(config, args["node"])
    keep = ("keyring.pgp",) if args.get("keyring") == "1" else ()
    state = _prepare(directory, args["job"], keep)
    if state:
        stdout.write((state + "\n").encode())
        return 0
    old = os.umask(0o077)
    try:
        _write(os.path.join(directory, "input.json"), document)
        _write(os.path.join(directory, "job"), args["job"].encode())
    finally:
        os.umask(old)
    argv = ["setsid", "flock", "lock", "sh", "-c", WRAPPER, "provision-wrapper"]
    subprocess.Popen(argv + provision_argv(args, config, directory), cwd=directory,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)
    stdout.write(b"started\n")
    return 0


def _keyring(args, config, stdin, stdout):
    data = _bounded_stdin(stdin, MAX_STDIN["keyring"], "the keyring")
    directory = job_dir(config, args["node"])
    state = _prepare(directory, args["job"])
    if state:
        stdout.write((state + "\n").encode())
        return 0
    _write(os.path.join(directory, "keyring.pgp"), data)
    return 0


def read_bounded(path, offset, limit):
    """limit bytes of path from offset (negative: that far from its end), None if missing."""
    try:
        with open(path, "rb") as f:
            if offset < 0:
                f.seek(max(0, os.fstat(f.fileno()).st_size + offset))
            else:
                f.seek(offset)
            return f.read(limit)
    except FileNotFoundError:
        return None


def _answer(data, stdout):
    if data is None:
        return MISSING
    stdout.write(data)
    return 0


def _read(args, config, stdin, stdout):
    path = os.path.join(job_dir(config, args["node"]), args["file"])
    return _answer(read_bounded(path, args["offset"], args["limit"]), stdout)


def _binding(args, config, stdin, stdout):
    path = binding.path(config.binding_dir, args["node"])
    return _answer(read_bounded(path, 0, binding.MAX_BYTES + 1), stdout)


def children(pid):
    """The pids whose parent is pid (/proc/PID/stat's fourth field)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read(4096)
            except OSError:
                continue
            if int(stat.rsplit(b")", 1)[1].split()[1]) == pid:
                found.append(int(name))
    return found


def _cancel(args, config, stdin, stdout):
    """SIGTERM to provision, the wrapper's child: the wrapper lives on to write the exit code
    and its "exited" event, so the conductor reads the end as for any other run."""
    events = read_bounded(os.path.join(job_dir(config, args["node"]), "events.jsonl"), 0, 4096)
    try:
        first = json.loads((events or b"{}").split(b"\n")[0] or b"{}")
    except ValueError:
        first = {}
    pid = first.get("pid") if first.get("status") == "started" else None
    running = children(pid) if isinstance(pid, int) else []
    if not running:
        stdout.write(b"no provision running here\n")
        return MISSING
    for child in running:
        try:
            os.kill(child, signal.SIGTERM)
        except ProcessLookupError:
            pass
    stdout.write(b"cancelled\n")
    return 0


def _inventory(args, config, stdin, stdout):
    done = subprocess.run([config.provision, "inventory"], capture_output=True, timeout=300,
                          check=False)
    stdout.write(done.stdout[:MAX_READ])
    return done.returncode


def _poweroff(args, config, stdin, stdout):
    subprocess.run(["sync"], check=False, timeout=60)
    program = shutil.which("provision-poweroff") or "poweroff"
    return subprocess.run([program], check=False, timeout=60).returncode


_START = _schema({"kind": {"enum": ["provision", "erase", "steps", "step"]}, "node": NODE,
                  "job": JOB,
                  "data_driver": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,31}$",
                                  "maxLength": 32},
                  "flag": {"type": "array", "items": {"enum": list(FLAGS)}, "maxItems": 4},
                  "keyring": {"enum": ["1"]}}, ["kind", "node", "job"])
_READ = _schema({"node": NODE, "file": {"enum": list(FILES)},
                 "offset": {"type": "integer", "minimum": -MAX_READ},
                 "limit": {"type": "integer", "minimum": 1, "maximum": MAX_READ}})

BUILT_IN = (
    Command("version", _version, _schema({})),
    Command("start", _start, _START, ("kind", "node", "job")),
    Command("keyring", _keyring, _schema({"node": NODE, "job": JOB}), ("node", "job")),
    Command("read", _read, _READ, ("node", "file", "offset", "limit")),
    Command("binding", _binding, _schema({"node": NODE}), ("node",)),
    Command("cancel", _cancel, _schema({"node": NODE}), ("node",)),
    Command("inventory", _inventory, _schema({})),
    Command("poweroff", _poweroff, _schema({})),
    Command("update", update.run, _schema({"signature": update.SIGNATURE}), ("signature",)),
)
