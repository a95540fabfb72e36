"""A warm provision in the ramdisk: the imports done once at boot, each run a fork (issue 58).

Under emulation, and on a slow core, provision's imports (oslo.config, jsonschema, requests,
the drivers) took 6-10 s of every job before its first write: more than everything else the
conductor pays between a heartbeat and the image. ramdisk/init starts `provision warm-server`
after sshd; it binds a socket only root can reach (SOCKET, in a 0700 directory, each peer's
uid checked by SO_PEERCRED), imports what a run needs, and then serves. The `provision` console
script (main here, importing nothing heavy) hands the server its argv, environment, working
directory, umask, priority and its stdin/stdout/stderr (SCM_RIGHTS); the server forks a
handler that forks the run itself, provision's usual main() in a process that has already
imported everything. The handler passes on the signals the command gets (SIGTERM still unwinds
the run and unmounts), stops the run when the command is gone (so a job's lock in the
conductor's wrapper is never released while its provision runs), and answers the run's exit
status, which the command exits with: to its caller `provision` behaves as before.

The command runs provision in its own process, as without the server, when there is no
server (any machine but our ramdisk), when PROVISION_WARM=off, when it is not root, or when
the server runs other code than the command would (an update in place made another provision
current: provision_agent/agent/update.py; the server's code is the one it started with).
"""

import array
import json
import os
import select
import signal
import socket
import struct
import sys

SOCKET = "/run/provision-warm/socket"
MAX_REQUEST = 256 * 1024      # argv and the environment; a bigger request is refused
MAX_ANSWER = 4096
REQUEST_SECONDS = 10
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
LOST = 70                     # the run ended without an exit status (errors.EXIT_UNEXPECTED)
# Imported once by the server: what a run, an erase or an inventory imports before its work.
PRELOAD = ("provision_agent.cli.main", "provision_agent.cli.hardware_commands",
           "provision_agent.run.apply", "provision_agent.run.erase",
           "provision_agent.run.executor", "provision_agent.run.runner",
           "provision_agent.machine.disks", "provision_agent.machine.preflight",
           "provision_agent.machine.image_tables", "provision_agent.drivers.images.write_step",
           "provision_agent.drivers.images.sources", "provision_agent.drivers.images.disk_head",
           "provision_agent.data_drivers.native", "provision_agent.data_drivers.ironic",
           "provision_agent.drivers.blockinfo", "provision_agent.drivers.mount")


def code_identity():
    """Which provision this process runs: the real path of its package."""
    import provision_agent
    return os.path.realpath(os.path.dirname(provision_agent.__file__))


def main(argv=None):
    """The `provision` command: the run in the warm server when one takes it, else here."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["warm-server"]:
        return serve()
    if os.environ.get("PROVISION_WARM", "on") != "off" and os.geteuid() == 0:
        status = run_warm(argv, SOCKET)
        if status is not None:
            return status
    from provision_agent.cli import main as cold
    return cold.main(argv)


def run_warm(argv, path=SOCKET):
    """The run's exit status from the server; None when no server takes it (nothing ran)."""
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
    except OSError:
        return None
    request = json.dumps({"argv": list(argv), "cwd": os.getcwd(), "env": dict(os.environ),
                          "umask": _umask(), "code": code_identity(),
                          "priority": os.getpriority(os.PRIO_PROCESS, 0)}).encode()
    with conn:
        answers = _Answers(conn)
        try:
            conn.sendmsg([struct.pack("!I", len(request)) + request],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
            answer = answers.next()
        except (OSError, ValueError):
            return None
        if "pid" not in answer:
            return None           # refused: nothing ran
        previous = {s: signal.signal(s, lambda sig, _f: _send(conn, sig)) for s in FORWARDED}
        try:
            return int(answers.next().get("exit", LOST))
        except (OSError, ValueError, TypeError):
            print("provision: the warm run ended without an exit status", file=sys.stderr)
            return LOST
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _umask():
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def _send(conn, sig):
    try:
        conn.sendall(bytes([sig]))
    except OSError:
        pass


class _Answers:
    """The server's answers, one JSON object a line, each at most MAX_ANSWER bytes."""

    def __init__(self, conn):
        self.conn, self.data = conn, b""

    def next(self):
        while b"\n" not in self.data:
            chunk = self.conn.recv(MAX_ANSWER)
            if not chunk or len(self.data) + len(chunk) > MAX_ANSWER:
                raise ValueError("no answer")
            self.data += chunk
        line, self.data = self.data.split(b"\n", 1)
        answer = json.loads(line)
        if not isinstance(answer, dict):
            raise ValueError("not an answer")
        return answer


def serve(path=SOCKET, preload=PRELOAD, target=None):
    """`provision warm-server`: never returns. Binds first, then imports: a command that
    comes meanwhile waits for the imports instead of doing them beside them. target: what a
    run calls with its argv (provision's main(); tests give their own)."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    os.chmod(os.path.dirname(path), 0o700)
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    listener.bind(path)
    os.umask(old)
    listener.listen(16)
    import importlib
    import time
    began = time.monotonic()
    for name in preload:
        importlib.import_module(name)
    identity = code_identity()
    print(f"provision warm-server: ready, {len(preload)} modules imported in "
          f"{time.monotonic() - began:.1f} s; serving {path}", flush=True)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # the handlers are reaped by the kernel
    while True:
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os._exit(_handle(conn, identity, target))
        conn.close()


def _handle(conn, identity, target):
    """One command: its request checked, its run forked, its signals passed on, its exit
    status answered. Returns the handler's own exit status."""
    try:
        request, fds = _request(conn)
    except (OSError, ValueError) as exc:
        _reply(conn, {"refused": str(exc)[:200]})
        return 1
    if request.get("code") != identity:
        _reply(conn, {"refused": f"this server runs {identity}"})
        return 1
    pid = os.fork()
    if pid == 0:
        conn.close()
        _become_run(request, fds, target)
    for fd in fds:
        os.close(fd)
    _reply(conn, {"pid": pid})
    return _follow(conn, pid)


def _request(conn):
    """(request, [stdin, stdout, stderr]) from a root peer, bounded in size and time."""
    uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
    if uid != 0:
        raise ValueError(f"uid {uid} is not root")
    conn.settimeout(REQUEST_SECONDS)
    fds = array.array("i")
    data, ancillary, _flags, _addr = conn.recvmsg(MAX_REQUEST + 4,
                                                  socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("stdin, stdout and stderr were not passed")
    try:
        length = struct.unpack("!I", data[:4])[0]
        if length > MAX_REQUEST:
            raise ValueError(f"a request of {length} bytes")
        while len(data) < length + 4:
            chunk = conn.recv(length + 4 - len(data))
            if not chunk:
                raise ValueError("the request ended early")
            data += chunk
        request = json.loads(data[4:length + 4])
        if not isinstance(request, dict) or not isinstance(request.get("argv"), list):
            raise ValueError("the request is not one")
    except (ValueError, struct.error) as exc:
        for fd in fds:
            os.close(fd)
        raise ValueError(f"bad request: {exc}") from None
    conn.settimeout(None)
    return request, list(fds)


def _become_run(request, fds, target):
    """In the run's process: the command's files, place, environment; then main(). Never
    returns."""
    status = LOST
    try:
        for number, fd in enumerate(fds):
            os.dup2(fd, number)
            os.close(fd)
        os.chdir(request["cwd"])
        os.umask(int(request["umask"]))
        os.setpriority(os.PRIO_PROCESS, 0, int(request["priority"]))
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in dict(request["env"]).items()})
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = ["provision", *[str(a) for a in request["argv"]]]
        if target is None:
            from provision_agent.cli.main import main as target
        status = target(sys.argv[1:])
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:   # the run's own errors are main()'s; this is ours
        print(f"provision: the warm run failed to start: {type(exc).__name__}: {exc}",
              file=sys.stderr)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status if isinstance(status, int) else LOST)


def _follow(conn, pid):
    """Signals from the command passed to the run; the run stopped (SIGTERM) when the command
    is gone; the run's exit status answered once it ends."""
    pidfd = os.pidfd_open(pid)
    gone = False
    while True:
        ready, _, _ = select.select([pidfd] + ([] if gone else [conn]), [], [])
        if pidfd in ready:
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            _reply(conn, {"exit": code if code >= 0 else 128 - code})
            return 0
        data = conn.recv(64)
        if not data:
            gone = True
            os.kill(pid, signal.SIGTERM)
        for sig in data:
            if sig in FORWARDED:
                os.kill(pid, sig)


def _reply(conn, answer):
    try:
        conn.sendall(json.dumps(answer).encode() + b"\n")
    except OSError:
        pass
