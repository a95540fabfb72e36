"""The IPA ramdisk's proofs (tox -e ipa; not in CI): root, qemu, mmdebstrap, as tests/e2e."""

import os
import shutil

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "ipa: boots the ironic-python-agent ramdisk in qemu "
                                       "(tox -e ipa, outside CI)")


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.ipa)


@pytest.fixture(scope="session")
def ipa_ramdisk():
    missing = [t for t in ("qemu-system-x86_64", "mmdebstrap", "cpio", "zstd")
               if not shutil.which(t)]
    if os.geteuid() != 0:
        missing.append("root (mmdebstrap --mode=root)")
    if missing:
        pytest.skip("missing: " + ", ".join(missing) + " (run scripts/host-packages.sh)")
    from tests.vmbench.ipa import ensure_ipa_ramdisk
    return ensure_ipa_ramdisk()
