"""A vendor's data driver (tests/plugins/example_format.py; issue 59): YAML input, its problems
in the vendor's own paths through the base class's origin map, and --help listing it."""

import contextlib
import io
import json

import pytest

from provision_agent.cli import main as cli
from provision_agent.errors import InputError
from provision_agent.plan import yaml_text
from tests.plugins import harness
from tests.unit.helpers import inventory, sample

VENDOR = """\
# the vendor's own format
storage:
  drive: /dev/vda
  volumes:
    - {name: root, size: 2GiB, fs: ext4, at: /}
    - name: data
      size: 1GiB
"""


@pytest.fixture
def vendor_yaml(tmp_path, monkeypatch):
    harness.install_plugins(tmp_path, monkeypatch,
                            {"vendor_yaml": "tests.plugins.example_format:VendorYaml"},
                            package="example-vendor-format",
                            namespace="provision_agent.data_drivers")


def _run(tmp_path, text, *extra, name="vendor.conf"):
    path = tmp_path / name
    path.write_text(text)
    inv = tmp_path / "inv.json"
    inv.write_text(json.dumps(inventory("three-disks")))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["--input_data_file", str(path), "--inventory_file", str(inv),
                       "--dry_run", *extra])
    return rc, out.getvalue(), err.getvalue()


def test_a_yaml_vendor_format_is_planned(tmp_path, vendor_yaml):
    rc, out, err = _run(tmp_path, VENDOR, "--data_driver", "vendor_yaml")
    assert rc == 0, err
    assert "/dev/vda1" in out and "ext4" in out


def test_schema_problems_are_named_in_the_vendors_paths(tmp_path, vendor_yaml):
    rc, out, err = _run(tmp_path, VENDOR.replace("1GiB", "lots"), "--data_driver",
                        "vendor_yaml")
    assert rc == 2
    assert "$.storage.volumes[1].size: 'lots' is not valid here" in err, err
    assert "$.disks[0]" not in err


def test_later_checks_name_the_vendors_paths_too(tmp_path, vendor_yaml):
    rc, out, err = _run(tmp_path, VENDOR.replace("/dev/vda", "/dev/vdq"), "--data_driver",
                        "vendor_yaml")
    assert rc == 3
    assert "$.storage.drive: no disk matches name='/dev/vdq'" in err, err


def test_help_lists_installed_data_drivers(vendor_yaml, capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "vendor_yaml" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("text,said", [
    ("a: &x [1]\nb: *x\n", "doc.yaml:2:4: not valid YAML: aliases (*name) are not accepted"),
    ("a: [1\n", "doc.yaml:2:1: not valid YAML"),
    ("1: x\n", "key '1' is not a string"),
    ("a: 2024-01-01\n", "$.a: a date is not a JSON value"),
    ("a: .inf\n", "$.a: inf is not a JSON number"),
    ("a:" + " [" * 70 + "]" * 70 + "\n", "nested deeper than 64 levels"),
])
def test_yaml_that_a_json_document_could_not_hold_is_refused(text, said):
    with pytest.raises(InputError) as caught:
        yaml_text.parse_document(text, "doc.yaml")
    assert said in str(caught.value)


def test_a_native_document_in_a_yaml_file(tmp_path):
    import yaml
    rc, out, err = _run(tmp_path, yaml.safe_dump(sample("single-disk")), name="layout.yaml")
    assert rc == 0, err
