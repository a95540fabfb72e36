"""Every file of the repository that the docs name exists: moving a test or a module must not
leave the README, the guides or tox.ini pointing at nothing."""

import glob
import os
import re

from tests import REPO_ROOT

DOCS = ("README.md", "tox.ini", "docs/*.md", "benchmarks/*.md", "ramdisk/**/*.md", "tests/**/*.md")
TOP = ("tests", "provision_agent", "ironic_driver", "benchmarks", "scripts", "ramdisk", "samples")
# A path in backquotes; templates such as tests/unit/<package>/ are not paths.
PATH = re.compile(r"`((?:%s)/[^`\s:<>]*)`" % "|".join(TOP))
# A test module named alone, as a table cell continues a list after one full path.
TEST_NAME = re.compile(r"`(test_[a-z0-9_]+\.py)")


def _documents():
    for pattern in DOCS:
        yield from sorted(glob.glob(os.path.join(REPO_ROOT, pattern), recursive=True))


def _missing(text):
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".,")
        if not glob.glob(os.path.join(REPO_ROOT, path)):
            yield path
    for match in TEST_NAME.finditer(text):
        if not glob.glob(os.path.join(REPO_ROOT, "tests", "**", match.group(1)), recursive=True):
            yield match.group(1)


def test_documents_were_found():
    names = [os.path.relpath(p, REPO_ROOT) for p in _documents()]
    assert "README.md" in names and "docs/testing.md" in names, names


def test_every_named_file_exists():
    missing = {}
    for path in _documents():
        with open(path, encoding="utf-8") as f:
            gone = sorted(set(_missing(f.read())))
        if gone:
            missing[os.path.relpath(path, REPO_ROOT)] = gone
    assert missing == {}


def test_the_check_sees_a_missing_file():
    assert list(_missing("see `tests/unit/test_nothing_here.py` and `test_nor_this.py`")) == [
        "tests/unit/test_nothing_here.py", "test_nor_this.py"]
