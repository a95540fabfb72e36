"""etc/provision.conf.sample is what oslo-config-generator makes from the options today."""

from oslo_config import generator

from tests.unit.helpers import REPO


def test_sample_config_is_current(tmp_path):
    out = tmp_path / "provision.conf.sample"
    generator.main(["--namespace", "provision_agent", "--output-file", str(out)])
    assert out.read_text() == (REPO / "etc" / "provision.conf.sample").read_text(), \
        "regenerate it: tox -e genconfig"
