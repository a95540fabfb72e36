"""What the functional tests need from the host: root and some tools. Missing ones skip the
module locally and fail it in CI (CI=true), where a skip must never count as a pass."""

import os
import shutil
import subprocess

import pytest


def require(*tools, root=True):
    """A pytestmark for a module needing tools (and root unless root=False)."""
    missing = [t for t in tools if not shutil.which(t)]
    problem = (missing and f"missing tools {missing}") or (
        root and os.geteuid() != 0 and "needs root")
    if problem and os.environ.get("CI") == "true":
        raise RuntimeError(f"functional tests cannot run: {problem}")
    return pytest.mark.skipif(bool(problem), reason=str(problem))


def sh(*argv):
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout
