"""The plug-in harness (tests/plugins/harness.py, docs/extending.md "Testing a plug-in") run
for real (issue 59): `provision --allow_loop_devices` on a loop device with the example
vendor's in-target step; its file read back from the device, its licence key nowhere in what
provision printed or the events."""

from tests.functional.prereq import require
from tests.plugins import harness

pytestmark = require("losetup", "mkfs.ext4", "wipefs", "blkid", "mount", "sgdisk")
plugins = harness.plugins
loop_run = harness.loop_run
LICENCE = "LIC-loop-5e1f-secret"


def test_the_example_plugin_writes_into_the_installed_system_on_a_loop_device(plugins,
                                                                             loop_run):
    disk = loop_run.disk(256 << 20)
    doc = {"version": 1,
           "disks": [{"id": "d", "match": {"name": disk}, "table": "gpt",
                      "partitions": [{"id": "root", "size": "remaining", "type": "linux"}]}],
           "filesystems": [{"device": "root", "type": "ext4", "mount": "/"}],
           "extensions": {"vendor_agent": {"server": "mgmt.example",
                                           "licence_key": LICENCE}}}
    result = loop_run(doc)
    assert result.rc == 0, result.err
    part = disk + "p1"
    assert loop_run.read(part, "/etc/vendor/agent.conf") == (
        f"server = mgmt.example\nlicence = {LICENCE}\n")
    done = [e for e in result.events if e.get("kind") == "vendor_agent"]
    assert [e["status"] for e in done] == ["start", "done"]
    for shown in (result.out, result.err, str(result.events)):
        assert LICENCE not in shown
