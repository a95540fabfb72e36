"""Loop devices as disks, only when asked (issue 59: a plug-in tried on a developer's machine):
without --allow_loop_devices a document naming /dev/loop1 is told why no disk matches and how
to opt in; with it, discovery lists the loop devices the document names, and no other."""

from provision_agent.cli import main as cli
from provision_agent.drivers import discovery
from tests.unit.drivers.test_discovery import FakeContext, disk
from tests.unit.helpers import run_cli, sample

LOOP_DOC = sample("single-disk")
LOOP_DOC["disks"][0]["match"] = {"name": "/dev/loop1"}


def test_a_loop_device_named_without_the_flag_says_how_to_opt_in(tmp_path):
    rc, out, err = run_cli(tmp_path, LOOP_DOC, "three-disks")
    assert rc == 3, err
    assert "no disk matches name='/dev/loop1'" in err
    assert ("loop devices are never disks unless provision runs with --allow_loop_devices"
            in err), err


def test_discovery_lists_only_the_named_loop_devices():
    devices = [disk("vda"), disk("loop0"), disk("loop1"), disk("loop2")]
    assert [d["name"] for d in discovery.discover_disks(FakeContext(devices))] == ["/dev/vda"]
    found = discovery.discover_disks(FakeContext(devices), loops=["/dev/loop1"])
    assert [d["name"] for d in found] == ["/dev/loop1", "/dev/vda"]


def test_the_flag_reaches_discovery_with_the_documents_loops(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(cli, "_live_disks", lambda loops=(): asked.append(loops) or [])
    path = tmp_path / "in.json"
    path.write_text(__import__("json").dumps(LOOP_DOC))
    cli.main(["validate", "--input_data_file", str(path), "--allow_loop_devices"])
    cli.main(["validate", "--input_data_file", str(path)])
    assert asked == [["/dev/loop1"], ()]


def test_erase_refuses_the_flag(capsys):
    assert cli.main(["erase", "--allow_loop_devices"]) == 2
    assert "'erase' never clears loop devices" in capsys.readouterr().err
