"""Commands and file copies into the guest with the OpenSSH client, host key pinned."""

import shlex
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    command: str
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self):
        return self.returncode == 0


class GuestCommandError(AssertionError):
    """A command in the guest failed; an AssertionError so pytest shows it as a test failure."""

    def __init__(self, result):
        self.result = result
        super().__init__(
            f"guest command {result.command!r} exited {result.returncode}\n"
            f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}")


class SSH:
    def __init__(self, port, key, known_hosts, host="127.0.0.1", user="root"):
        self.port = port
        self.target = f"{user}@{host}"
        self.options = [
            "-i", str(key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10",
            "-o", "ServerAliveInterval=15", "-o", "LogLevel=ERROR",
        ]

    def run(self, command, *, check=True, timeout=600, input=None):
        """Run a shell command line in the guest (a list is quoted for you)."""
        if not isinstance(command, str):
            command = shlex.join(str(c) for c in command)
        argv = ["ssh", "-p", str(self.port), *self.options, self.target, command]
        try:
            proc = subprocess.run(argv, input=input, capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            result = Result(command, -1, _text(exc.stdout), _text(exc.stderr) + "\n(timed out)")
            raise GuestCommandError(result) from None
        result = Result(command, proc.returncode, proc.stdout, proc.stderr)
        if check and not result.ok:
            raise GuestCommandError(result)
        return result

    def put(self, local, remote, timeout=600):
        self._scp([str(local)], f"{self.target}:{remote}", timeout)

    def get(self, remote, local, timeout=600):
        self._scp([f"{self.target}:{remote}"], str(local), timeout)

    def _scp(self, sources, dest, timeout):
        argv = ["scp", "-q", "-r", "-P", str(self.port), *self.options, *sources, dest]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise GuestCommandError(Result(" ".join(argv), proc.returncode, proc.stdout,
                                           proc.stderr))


def _text(data):
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
