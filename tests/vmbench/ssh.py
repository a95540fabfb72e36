"""Commands and file copies into the guest with the OpenSSH client, host key pinned."""

import shlex
import subprocess
import threading
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
        # scp reads a colon as the end of the host: an IPv6 address goes in brackets
        self.copy_target = f"{user}@[{host}]" if ":" in host else self.target
        self.options = [
            "-i", str(key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10",
            "-o", "ServerAliveInterval=15", "-o", "LogLevel=ERROR",
        ]

    def run(self, command, *, check=True, timeout=600, input=None, echo=None):
        """Run a shell command line in the guest (a list is quoted for you).

        echo: called with each line of output (stdout and stderr) as it arrives, for a person
        watching; the Result still has both in full.
        """
        if not isinstance(command, str):
            command = shlex.join(str(c) for c in command)
        argv = ["ssh", "-p", str(self.port), *self.options, self.target, command]
        if echo is not None:
            return self._run_echoing(argv, command, check, timeout, input, echo)
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

    def _run_echoing(self, argv, command, check, timeout, input, echo):
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = [], []

        def pump(stream, keep):
            for line in stream:
                keep.append(line)
                echo(line.rstrip("\n"))

        threads = [threading.Thread(target=pump, args=a, daemon=True)
                   for a in ((proc.stdout, out), (proc.stderr, err))]
        for t in threads:
            t.start()
        if input:
            proc.stdin.write(input)
            proc.stdin.close()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise GuestCommandError(Result(command, -1, "".join(out),
                                           "".join(err) + "\n(timed out)")) from None
        for t in threads:
            t.join()
        result = Result(command, proc.returncode, "".join(out), "".join(err))
        if check and not result.ok:
            raise GuestCommandError(result)
        return result

    def put(self, local, remote, timeout=600):
        self._scp([str(local)], f"{self.copy_target}:{remote}", timeout)

    def get(self, remote, local, timeout=600):
        self._scp([f"{self.copy_target}:{remote}"], str(local), timeout)

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
