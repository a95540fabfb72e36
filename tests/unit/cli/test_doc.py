"""docs/cli.md's option and exit-code tables are the code's (scripts/cli_doc.py), and
`provision --help` says the same exit codes."""

import os
import subprocess
import sys

from provision_agent import errors
from tests import REPO_ROOT

ROOT = REPO_ROOT


def test_the_tables_are_generated_from_the_code():
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "cli_doc.py"),
                           "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_help_lists_every_exit_code():
    from provision_agent.cli import main as cli
    for code, text in errors.EXIT_CODES.items():
        assert f"{code} {text}" in " ".join(cli.EPILOG.split())
