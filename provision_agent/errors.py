"""Typed errors. Each carries the process exit code the CLI turns it into.

EXIT_CODES is what `provision --help` and docs/cli.md say about them (scripts/cli_doc.py).
"""

from dataclasses import dataclass

EXIT_OK = 0
EXIT_UNEXPECTED = 1
EXIT_INVALID_INPUT = 2
EXIT_MACHINE_MISMATCH = 3
EXIT_COMMAND_FAILED = 4
EXIT_IMAGE_ERROR = 5
EXIT_INPUT_UNREACHABLE = 6
EXIT_CODES = {
    EXIT_OK: "success (or a dry run that planned)",
    EXIT_UNEXPECTED: "unexpected error (run with --debug for a traceback)",
    EXIT_INVALID_INPUT: "invalid input: schema or semantic problems, each listed with its "
                        "location",
    EXIT_MACHINE_MISMATCH: "the machine does not match: a disk not found, ambiguous, or too "
                           "small",
    EXIT_COMMAND_FAILED: "a command failed while executing (the command, exit code and stderr "
                         "are shown)",
    EXIT_IMAGE_ERROR: "image error: download, checksum, signature, decompression or format",
    EXIT_INPUT_UNREACHABLE: "the input document could not be fetched (--input_data_url: "
                            "unreachable, refused, HTTP error or TLS failure, after retries)",
}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input, with where it is (a JSON path or an object id)."""

    location: str
    message: str

    def __str__(self):
        return f"{self.location}: {self.message}"


class ProvisionError(Exception):
    exit_code = EXIT_UNEXPECTED


class _ProblemsError(ProvisionError):
    """An error that lists every problem found, not just the first."""

    headline = "problems"

    def __init__(self, problems):
        self.problems = list(problems)
        lines = [f"{self.headline} ({len(self.problems)}):"]
        lines += [f"  - {p}" for p in self.problems]
        super().__init__("\n".join(lines))


class InputError(_ProblemsError):
    exit_code = EXIT_INVALID_INPUT
    headline = "invalid input"


class MachineMismatch(_ProblemsError):
    exit_code = EXIT_MACHINE_MISMATCH
    headline = "the machine does not match the input"


class CommandError(ProvisionError):
    """An external command failed; keeps what an operator needs to see why."""

    exit_code = EXIT_COMMAND_FAILED

    def __init__(self, argv, returncode, stdout="", stderr="", reason=None):
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout or ""
        self.stderr = stderr or ""
        tail = "\n".join(self.stderr.strip().splitlines()[-10:])
        what = reason or f"exited with {returncode}"
        msg = f"command {' '.join(self.argv)!r} {what}"
        if tail:
            msg += f"; stderr:\n{tail}"
        super().__init__(msg)


class ImageError(ProvisionError):
    """Download, checksum, decompression or format problem with an image."""

    exit_code = EXIT_IMAGE_ERROR


class InputUnreachable(ProvisionError):
    """--input_data_url could not be fetched: nothing is known about the input yet."""

    exit_code = EXIT_INPUT_UNREACHABLE

    def __init__(self, where, reason):
        self.where, self.reason = where, reason
        super().__init__(f"cannot fetch the input document from {where}: {reason}")


class DiskFault(ProvisionError):
    """A disk the plan writes failed I/O (the kernel said so), or an array member failed
    under on_member_failure: fail. The run stopped there: nothing more is written, what it
    mounted is unmounted and what it assembled stopped (run/faults.py)."""

    exit_code = EXIT_COMMAND_FAILED

    def __init__(self, message, disk, step):
        self.disk, self.step = disk, step
        super().__init__(message)


class DiskStalled(ProvisionError):
    """A disk the plan writes stopped answering: requests in flight and none finishing for the
    stall deadline (run/disk_watch.py). Threads or programs may still wait on it in the
    kernel, so the CLI leaves without waiting for them (cli/main.py)."""

    exit_code = EXIT_COMMAND_FAILED


class DiskGone(ProvisionError):
    """A disk the plan writes went away during the run (hot-unplugged, its controller or link
    lost): the step's own error is told as what it is (apply.py)."""

    exit_code = EXIT_COMMAND_FAILED
