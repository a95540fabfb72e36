"""The commands of docs/ironic.md, run verbatim: every ```bash block that follows a
`<!-- run: NAME -->` marker. The tests set the shell variables the blocks use; a block that
no longer works against a real Ironic fails the test that runs it."""

import os
import re
import subprocess
import sys

from tests import REPO_ROOT

ROOT = REPO_ROOT
DOC = os.path.join(ROOT, "docs", "ironic.md")
MARKED = re.compile(r"^<!-- run: ([a-z0-9-]+) -->\n```bash\n(.*?)^```$", re.M | re.S)
RAN = set()


def blocks():
    with open(DOC) as f:
        found = MARKED.findall(f.read())
    names = [name for name, _ in found]
    assert len(names) == len(set(names)), f"duplicate run markers in {DOC}: {names}"
    return dict(found)


def run(name, env, timeout=300, ok=True, cwd=None):
    """Runs one block with bash -eu (in cwd: a block may write files where it runs); returns
    the CompletedProcess (stdout+stderr in .out)."""
    script = blocks()[name]
    full_env = dict(os.environ, **env)
    # The `baremetal` CLI of the venv running the tests comes first.
    full_env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + full_env.get("PATH", "")
    done = subprocess.run(["bash", "-eu", "-o", "pipefail", "-c", script], env=full_env,
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)
    done.out = done.stdout + done.stderr
    RAN.add(name)
    if ok and done.returncode != 0:
        raise AssertionError(f"docs/ironic.md block {name!r} failed ({done.returncode}):\n"
                             f"{script}\n--- output:\n{done.out}")
    return done
