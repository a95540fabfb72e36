"""The live machine's disks are read once udev has processed their events."""

from provision_agent.drivers import discovery
from provision_agent.machine import disks as machine_disks
from tests.unit.fakes import FakeRunner


def test_discovery_waits_for_udev_before_reading_the_disks(monkeypatch):
    """A disk whose add event udev has not processed yet has no WWN, serial or by-path link
    in udev's database, so a hint would not find it: with 27 SCSI disks the ramdisk's own
    settle at boot gave up before udev was done. Discovery settles first, then reads."""
    runner = FakeRunner()
    seen_when_read = []

    def read(context=None, loops=()):
        seen_when_read.extend(runner.lines())
        return [{"name": "/dev/sdaa", "size": 1 << 30}]

    monkeypatch.setattr(discovery, "discover_disks", read)
    found = machine_disks.discover(runner)
    assert [d["name"] for d in found] == ["/dev/sdaa"]
    assert len(seen_when_read) == 1 and seen_when_read[0].startswith("udevadm settle --timeout=")


def test_discovery_without_a_runner_runs_nothing(monkeypatch):
    monkeypatch.setattr(discovery, "discover_disks",
                        lambda context=None, loops=(): [{"name": "sdb", "size": 1}])
    assert machine_disks.discover()[0]["name"] == "/dev/sdb"
