"""tests/unit/test_bounded_http.py again under /usr/bin/python3 with Debian's requests and urllib3
1.26: the HTTP stack the ramdisk carries (ramdisk/packages.txt), where `raw.read(n,
decode_content=True)` inflated a whole gzip answer before any size check.
Installed by scripts/host-packages.sh; missing, it skips locally and fails in CI."""

import os
import subprocess

import pytest

from tests.unit.test_bounded_http import (  # noqa: F401  (collected here with this module's python)
    bombs,
    test_a_redirects_own_body_is_never_read,
    test_an_answer_that_inflates_past_the_limit_is_refused_in_bounded_memory,
    test_an_image_served_with_content_encoding_is_read_as_the_server_stores_it,
)

DEBIAN_PYTHON = "/usr/bin/python3"


def _debian_urllib3():
    try:
        out = subprocess.run([DEBIAN_PYTHON, "-c", "import requests, tenacity, urllib3; "
                              "print(urllib3.__version__)"], capture_output=True, text=True,
                             check=False, env=dict(os.environ, PYTHONPATH=""))
    except OSError as exc:
        return f"{DEBIAN_PYTHON}: {exc.strerror}"
    version = out.stdout.strip()
    if out.returncode or not version.startswith("1.26."):
        return (f"{DEBIAN_PYTHON} lacks Debian's requests/tenacity on urllib3 1.26 "
                f"({version or out.stderr.strip()[-200:]}); run scripts/host-packages.sh")
    return None


_MISSING = _debian_urllib3()
if _MISSING and os.environ.get("CI") == "true":
    raise RuntimeError(f"functional tests cannot run: {_MISSING}")
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=str(_MISSING))


@pytest.fixture
def python():
    return DEBIAN_PYTHON
