"""docs/ironic.md stays in step with the code: its option table is generated from
ironic_driver/config.py (and so is etc/ironic-provision.conf.sample), and its runnable blocks
(run by tox -e ironic) are well formed."""

import importlib.util
import os

from tests import REPO_ROOT
from tests.ironic import guide

ROOT = REPO_ROOT


def _script():
    path = os.path.join(ROOT, "scripts", "ironic_doc_options.py")
    spec = importlib.util.spec_from_file_location("ironic_doc_options", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_option_table_is_generated_from_the_code():
    script = _script()
    with open(guide.DOC) as f:
        text = f.read()
    assert script.update(text) == text, \
        "docs/ironic.md is out of date: run python scripts/ironic_doc_options.py"
    from ironic_driver import config
    for opt in config.opts:
        assert f"| `{opt.dest}` |" in text


def test_the_conductors_sample_config_is_current(tmp_path):
    from oslo_config import generator
    out = tmp_path / "ironic-provision.conf.sample"
    generator.main(["--namespace", "ironic_driver", "--output-file", str(out)])
    with open(os.path.join(ROOT, "etc", "ironic-provision.conf.sample")) as f:
        assert out.read_text() == f.read(), "regenerate it: tox -e genconfig"


def test_runnable_blocks_are_found():
    found = guide.blocks()
    assert {"enroll", "deploy", "template", "trait", "node-default"} <= set(found)
    assert "baremetal deploy template create CUSTOM_RAID1_LVM" in found["template"]
    assert all(text.strip() for text in found.values())
    # tests/ironic/integration/test_guide.py sets these two for its Ironic; the guide must say
    # the same.
    with open(guide.DOC) as f:
        assert "export OS_AUTH_TYPE=none OS_ENDPOINT=" in f.read()
