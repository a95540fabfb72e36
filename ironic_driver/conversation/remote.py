"""What the conductor does in the ramdisk: upload the input, start provision detached, read
its state back. Paths and commands only; the SSH session comes from ironic_driver.conversation.ssh.

provision runs under setsid with stdin/stdout/stderr redirected, so it survives the SSH
session and the conductor holds no connection while it works. It writes:
    <dir>/events.jsonl   provision's --events_file, between two "wrapper" events
    <dir>/provision.log  provision's --log_file (debug level)
    <dir>/output.log     its stdout and stderr (the plan, the error line)
    <dir>/exit_code      written (atomically, via rename) only after provision exited
    <dir>/recovery-keys.json  the recovery keys of encrypted volumes, age ciphertext
                         (recovery.py)
    <dir>/lock           flock(1)ed by the wrapper for as long as provision runs
    <dir>/job            the job's identity (driver_internal_info/provision_job), written
                         before provision starts

The lock and the job file make a second start harmless: if the node's progress could not be
saved after a start (the node was locked by someone else, or the conductor died and another
one took the node over), the next poll finds provision still running, or finished with this
job's identity, and adopts it instead of wiping its files and starting another provision on
the same disks. Files of an earlier job (another identity) are cleared.
"""

import json
import re
import shlex

from ironic_driver.conversation import recovery, ssh, ssh_after
from provision_agent import binding

INPUT = "input.json"
KEYRING = "keyring.pgp"     # [provision_agent]image_keyring's content, for --image_keyring
EVENTS = "events.jsonl"
LOG = "provision.log"
OUTPUT = "output.log"
EXIT_CODE = "exit_code"
LOCK = "lock"
JOB = "job"
RUNNING = "provision-already-running"
BINDING_END = "provision-binding-end"   # after the binding file, before the document
GO = "go"
FINISHED = "provision-already-finished"

# provision's debug log of a real deploy runs to megabytes; last_error needs a few lines, and
# one poll need not pull a backlog of progress events at once (the rest comes next poll).
TAIL_BYTES = 64 * 1024
EVENTS_BYTES_PER_POLL = 1024 * 1024
# An exit code is a few digits; a file that says more is not one.
EXIT_CODE_BYTES = 32
EXIT_CODE_RE = re.compile(rb"\s*(\d{1,3})\s*")


class BadRamdisk(Exception):
    """What the ramdisk shows cannot be what our wrapper wrote, or it is not this node's
    ramdisk: not worth another look."""


def provision_argv(provision, data_driver, extra_args=(), subcommand=None):
    """provision's command line before the file options: `provision [erase] [--data_driver D]
    [extra]` (a subcommand has to come first)."""
    argv = [provision] + ([subcommand] if subcommand else [])
    if data_driver:
        argv += ["--data_driver", data_driver]
    return argv + list(extra_args)


def start_command(directory, command, job=None):
    """command: provision_argv(...); the input, events and log files are added here. job:
    the job's identity, kept in the directory beside its files."""
    q = shlex.quote
    path = lambda name: q(ssh.join(directory, name))  # noqa: E731
    argv = list(command) + ["--input_data_file", ssh.join(directory, INPUT),
                            "--events_file", ssh.join(directory, EVENTS),
                            "--log_file", ssh.join(directory, LOG)]
    if not set(command[1:2]) & {"erase", "steps", "step"}:   # provision's run only
        argv += ["--recovery_key_file", ssh.join(directory, recovery.FILE)]
    # The wrapper's own two events bracket provision's, so the conductor sees the start and
    # the exit even when provision emits nothing (a --dry_run, or a crash before its first).
    # The start's time by the ramdisk's clock: provision's start-up, input and planning are
    # what lies between it and the first step's event (the conductor's log and benchmarks).
    started = q('{"event": "wrapper", "status": "started", "pid": %d, "time": %s}')
    exited = q('{"event": "wrapper", "status": "exited", "exit_code": %d}')
    inner = (f"printf {started}'\\n' $$ \"$(date +%s.%N)\" >>{path(EVENTS)}; "
             f"{' '.join(q(a) for a in argv)} >{path(OUTPUT)} 2>&1; rc=$?; "
             f"printf {exited}'\\n' $rc >>{path(EVENTS)}; "
             f"echo $rc >{path(EXIT_CODE)}.tmp && mv {path(EXIT_CODE)}.tmp {path(EXIT_CODE)}")
    # `&` must apply to setsid alone, whose redirections happen before it runs. In
    # `cd D && setsid ... &` it backgrounded the whole list: a subshell that kept the SSH
    # channel's stdout open and waited for provision, so the start call (and the conductor's
    # periodic task with it) blocked for the whole provision.
    identity = f"printf %s {q(job)} >{path(JOB)} || exit 1; " if job else ""
    return (f"cd {q(directory)} || exit 1; {identity}"
            f"setsid flock {path(LOCK)} sh -c {q(inner)} </dev/null >/dev/null 2>&1 &")


def prepare_command(directory, job=None):
    """Empties the directory for a new run; prints RUNNING and keeps everything when a
    provision still holds the lock, FINISHED when the job named job already ran to its
    exit code there."""
    q = shlex.quote
    names = " ".join(q(ssh.join(directory, n)) for n in
                     (INPUT, KEYRING, EVENTS, LOG, OUTPUT, EXIT_CODE, EXIT_CODE + ".tmp", JOB,
                      recovery.FILE))
    lock = q(ssh.join(directory, LOCK))
    finished = (f"if [ -s {q(ssh.join(directory, EXIT_CODE))} ] && "
                f"[ \"$(cat {q(ssh.join(directory, JOB))} 2>/dev/null)\" = {q(job)} ]; "
                f"then echo {FINISHED}; exit 0; fi; ") if job else ""
    return (f"mkdir -p -m 700 {q(directory)} || exit 1; "
            f"if ! flock -n {lock} true; then echo {RUNNING}; exit 0; fi; "
            f"{finished}rm -f {names}")


def verify_binding(session, binding_dir, node_uuid, token):
    """BadRamdisk unless the ramdisk at the other end of session looked up node_uuid with the
    agent token the node holds now (provision_agent/binding.py)."""
    data = session.read(binding.path(binding_dir, node_uuid), 0, binding.MAX_BYTES + 1)
    try:
        binding.check(data, node_uuid, token)
    except binding.Mismatch as exc:
        raise BadRamdisk(f"it is not the ramdisk that looked up node {node_uuid}: {exc}") \
            from None


def start_with_input_command(directory, command, job=None):
    """prepare_command, the input document written from stdin and start_command in one
    shell: the whole start is one command over the SSH session, instead of a command, an
    SFTP upload (open, write, close, chmod, rename: a round trip each) and another command.
    stdin is read to its end whatever happens, so the sender never writes into a closed
    channel; the document is kept only when this start goes ahead."""
    q = shlex.quote
    path = q(ssh.join(directory, INPUT))
    return (f"state=$({{ {prepare_command(directory, job)}; }} 2>&1) || {{ cat >/dev/null; "
            f"printf '%s\\n' \"$state\"; exit 1; }}; "
            f"case $state in *{RUNNING}*|*{FINISHED}*) cat >/dev/null; echo \"$state\"; "
            f"exit 0;; esac; "
            # the umask in a subshell: provision, started next, keeps the ramdisk's own
            f"(umask 077; cat >{path}.part) && mv {path}.part {path} || exit 1; "
            f"{start_command(directory, command, job)}")


def bound_start_command(binding_path, directory, command, job=None):
    """The ramdisk's binding file printed (bounded), then BINDING_END; then, only after the
    line GO on stdin, start_with_input_command with the rest of stdin as the document.
    Anything else, or an end of file, ends it with nothing done."""
    q = shlex.quote
    return (f"head -c {binding.MAX_BYTES + 1} {q(binding_path)} 2>/dev/null; "
            f"printf '\\n%s\\n' {q(BINDING_END)}; "
            f"IFS= read -r go && [ \"$go\" = {GO} ] || exit 3; "
            + start_with_input_command(directory, command, job))


def start_bound(session, binding_dir, node_uuid, token, directory, document_text, command,
                job=None):
    """verify_binding and start (without a keyring) in one command: the binding is read and
    checked here before the document is sent (BadRamdisk then, and nothing was sent or
    started). True when provision was started, False as start()."""
    def decide(head):
        data = head[:-1] if head.endswith(b"\n") else head   # the newline before the marker
        try:
            binding.check(data or None, node_uuid, token)
        except binding.Mismatch as exc:
            raise BadRamdisk(f"it is not the ramdisk that looked up node {node_uuid}: {exc}") \
                from None
        return f"{GO}\n{document_text}".encode()
    text = bound_start_command(binding.path(binding_dir, node_uuid), directory, command, job)
    rc, out = ssh_after.run_after(session, text, binding.MAX_BYTES + 1, BINDING_END, decide)
    if rc != 0:
        raise RuntimeError(f"cannot start provision in the ramdisk: {out.strip()[:500]}")
    return out.strip() not in (RUNNING, FINISHED)


def start(session, directory, document_text, command, job=None, keyring=None, bound=None):
    """True when provision (command: provision_argv(...)) was started; False when one was
    already running there, or the same job (job: its identity) had already finished.
    keyring: the bytes of the image keyring, uploaded beside the document for
    --image_keyring (then the start takes three steps; without one, a single command that
    reads the document on its stdin). bound: (binding_dir, node_uuid, token): the ramdisk's
    binding checked first (verify_binding; BadRamdisk, nothing sent), without a keyring in
    the same command as the start (start_bound)."""
    if bound is not None and keyring is None:
        return start_bound(session, *bound, directory, document_text, command, job)
    if bound is not None:
        verify_binding(session, *bound)
    if keyring is None:
        rc, out = session.run(start_with_input_command(directory, command, job),
                              stdin=document_text.encode())
        if rc != 0:
            raise RuntimeError(f"cannot start provision in the ramdisk: {out.strip()[:500]}")
        return out.strip() not in (RUNNING, FINISHED)
    rc, out = session.run(prepare_command(directory, job))
    if rc != 0:
        raise RuntimeError(f"cannot prepare {directory} in the ramdisk: {out.strip()[:500]}")
    if out.strip() in (RUNNING, FINISHED):
        return False
    session.upload(document_text, ssh.join(directory, INPUT))
    if keyring is not None:
        session.upload(keyring, ssh.join(directory, KEYRING))
        command = list(command) + ["--image_keyring", ssh.join(directory, KEYRING)]
    rc, out = session.run(start_command(directory, command, job))
    if rc != 0:
        raise RuntimeError(f"cannot start provision in the ramdisk: {out.strip()[:500]}")
    return True


def parse_exit_code(data):
    """The exit code our wrapper wrote, None while there is none; BadRamdisk for anything
    else (a ramdisk, or a hook of the image in its chroot, that wrote something else)."""
    if data is None or not data.strip():
        return None
    match = EXIT_CODE_RE.fullmatch(data)
    if not match:
        raise BadRamdisk(f"its {EXIT_CODE} file holds {len(data)}"
                         f"{'+' if len(data) > EXIT_CODE_BYTES else ''} bytes that are not an "
                         "exit code")
    return int(match.group(1))


def parse_events(data):
    """Complete JSON lines of data → (events, bytes consumed); a partial last line waits."""
    events, used = [], 0
    for line in data.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        used += len(line)
        try:
            events.append(json.loads(line))
        except ValueError:
            events.append({"event": "unparsed", "line": line.decode(errors="replace")[:200]})
    return events, used


def tail(text, lines):
    return "\n".join(text.strip().splitlines()[-lines:])


def status(session, directory, events_offset, tail_lines):
    """One look at a running provision: dict(exit_code, events, events_offset, tail)."""
    code = parse_exit_code(session.read(ssh.join(directory, EXIT_CODE), 0, EXIT_CODE_BYTES + 1))
    new = session.read(ssh.join(directory, EVENTS), events_offset, EVENTS_BYTES_PER_POLL) or b""
    events, used = parse_events(new)
    if not used and len(new) >= EVENTS_BYTES_PER_POLL:
        # One line longer than a whole poll's read would stop the stream for good.
        events, used = [{"event": "unparsed", "line": new[:200].decode(
            errors="replace")}], len(new)
    result = {"exit_code": code, "events": events, "events_offset": events_offset + used,
              "tail": ""}
    if code == 0:
        try:
            result["recovery_keys"] = recovery.parse(session.read(
                ssh.join(directory, recovery.FILE), 0, recovery.MAX_BYTES + 1))
        except recovery.BadKeys as exc:
            raise BadRamdisk(f"its {recovery.FILE}: {exc}") from None
    if code is not None:
        output = session.read(ssh.join(directory, OUTPUT), -TAIL_BYTES, TAIL_BYTES) or b""
        text = output.decode(errors="replace")
        if not text.strip():
            text = (session.read(ssh.join(directory, LOG), -TAIL_BYTES, TAIL_BYTES)
                    or b"").decode(errors="replace")
        result["tail"] = tail(text, tail_lines)
    return result
