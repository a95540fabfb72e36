"""Which method erases each disk (run/secure_erase.py) and what `provision erase` asks for."""

import json

import pytest

from provision_agent.errors import InputError
from provision_agent.run import erase, secure_erase
from tests.unit.fakes import FakeRunner

ATA_OK = {"supported": True, "enabled": False, "locked": False, "frozen": False,
          "enhanced": False, "minutes": 2}
NVME_CRYPTO = {"format": True, "crypto": True}


@pytest.mark.parametrize("caps, state, discards, mode, want", [
    (NVME_CRYPTO, None, 1 << 30, "full", ["nvme_crypto", "discard", "overwrite"]),
    ({"format": True, "crypto": False}, None, 0, "express", ["nvme_user_data"]),
    (None, ATA_OK, 0, "full", ["ata", "overwrite"]),
    (None, dict(ATA_OK, enhanced=True), 0, "full", ["ata_enhanced", "overwrite"]),
    (None, dict(ATA_OK, frozen=True), 1 << 30, "express", ["discard"]),
    (None, None, 0, "express", []),                  # the metadata erase alone
    (None, None, 0, "full", ["overwrite"]),
])
def test_the_strongest_method_the_hardware_offers_comes_first(caps, state, discards, mode,
                                                              want):
    assert secure_erase.candidates(caps, state, discards, mode)[0] == want


def test_a_frozen_ata_disk_says_why_it_was_not_security_erased():
    _, why = secure_erase.candidates(None, dict(ATA_OK, frozen=True), 0, "full")
    assert "ATA security is frozen" in why


def test_a_discard_that_does_not_read_back_as_zeros_hands_over_to_the_overwrite():
    r = FakeRunner({})
    zero_after = iter([False, True])
    method, notes = secure_erase.erase_disk(r, "/dev/vdb", "full", passes=3,
                                            probe=(None, None, 1 << 30),
                                            zero_check=lambda disk: next(zero_after))
    assert method == "overwrite"
    assert r.lines() == ["blkdiscard --force /dev/vdb",
                         "shred --force --iterations=2 /dev/vdb",
                         "blkdiscard --zeroout --force /dev/vdb"]
    assert "discard: the disk did not read as zeros after it" in notes


def test_a_failed_nvme_format_hands_over_and_express_never_overwrites():
    r = FakeRunner({}, fail=("nvme format",))
    method, notes = secure_erase.erase_disk(r, "/dev/nvme0n1", "express",
                                            probe=(NVME_CRYPTO, None, 0),
                                            zero_check=lambda disk: True)
    assert method == "metadata"
    assert notes[-1].startswith("nvme_crypto failed")
    assert not [c for c in r.lines() if "shred" in c or "zeroout" in c]


def test_reads_zero_looks_at_both_ends_and_between(tmp_path):
    disk = tmp_path / "disk.img"
    with open(disk, "wb") as f:
        f.truncate(64 << 20)
    assert secure_erase.reads_zero(str(disk))
    with open(disk, "r+b") as f:
        f.seek((64 << 20) - 10)
        f.write(b"tenant")
    assert not secure_erase.reads_zero(str(disk))


@pytest.mark.parametrize("doc, where", [
    ({"method": "shred"}, "$.method"),
    ({"method": "full", "overwrite_passes": 0}, "$.overwrite_passes"),
    ({"overwrite_passes": True}, "$.overwrite_passes"),
])
def test_an_erase_method_the_input_gets_wrong_is_located(doc, where):
    with pytest.raises(InputError) as exc:
        erase.method(doc)
    assert [p.location for p in exc.value.problems] == [where]


def test_the_metadata_erase_stays_the_default():
    assert erase.method(None) == ("metadata", 1)
    assert erase.method({"skip_block_devices": []}) == ("metadata", 1)


def test_erase_full_reports_the_method_of_each_disk_in_its_events(monkeypatch, tmp_path):
    import json

    from provision_agent.drivers import wipe
    from provision_agent.run.events import Events
    from tests.unit.run.test_erase import DISKS, runner
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    monkeypatch.setattr(secure_erase, "erase_disk",
                        lambda r, name, mode, passes, tick, erasing: ("discard", ["no ATA"]))
    path = tmp_path / "events.jsonl"
    events = Events([open(path, "w")])
    report = erase.erase({"method": "full", "skip_block_devices": [{"serial": "keepme"}]},
                         runner(), events, disks=DISKS[:1], mounted={}, swaps=[])
    events.close()
    assert report["methods"] == {"/dev/vda": "discard"}
    said = [json.loads(line) for line in path.read_text().splitlines()]
    done = [e for e in said if e.get("kind") == "erase_device" and e["status"] == "done"]
    assert done[0]["description"] == "erase /dev/vda: discard (no ATA)"


def test_a_full_erase_that_could_not_erase_a_disk_fails_the_run(monkeypatch):
    from provision_agent.drivers import wipe
    from provision_agent.errors import CommandError
    from provision_agent.run.events import Events
    from tests.unit.run.test_erase import DISKS, runner
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    monkeypatch.setattr(secure_erase, "erase_disk",
                        lambda r, name, mode, passes, tick, erasing: ("metadata",
                                                                      ["overwrite failed"]))
    with pytest.raises(CommandError, match="was not erased"):
        erase.erase({"method": "full"}, runner(), Events([]), disks=DISKS[:1], mounted={},
                    swaps=[])


def test_a_long_erase_keeps_reporting_progress():
    import time
    ticks = []
    with secure_erase.ticking(lambda: ticks.append(1), interval=0.01):
        time.sleep(0.1)
    assert len(ticks) >= 3
    settled = len(ticks)
    time.sleep(0.05)
    assert len(ticks) == settled        # stopped with the block


def test_discard_support_is_read_from_the_disks_block_queue(tmp_path):
    sysfs = tmp_path / "class" / "block"
    queue = tmp_path / "devices" / "vdb" / "queue"
    queue.mkdir(parents=True)
    (queue / "discard_max_bytes").write_text("2147483136\n")
    (tmp_path / "devices" / "vdb" / "vdb1").mkdir()
    sysfs.mkdir(parents=True)
    (sysfs / "vdb").symlink_to(tmp_path / "devices" / "vdb")
    (sysfs / "vdb1").symlink_to(tmp_path / "devices" / "vdb" / "vdb1")
    assert secure_erase.discard_bytes("/dev/vdb", str(sysfs)) == 2147483136
    assert secure_erase.discard_bytes("/dev/vdb1", str(sysfs)) == 2147483136   # its disk's
    assert secure_erase.discard_bytes("/dev/vdz", str(sysfs)) == 0


NVME_DISKS = [{"name": "/dev/nvme0n1", "size": 1 << 30, "serial": "ctrl0"},
              {"name": "/dev/nvme0n2", "size": 1 << 30, "serial": "ctrl0"}]


def _nvme_runner(fna):
    """Two namespaces on one controller whose Identify Controller reports fna."""
    from tests.unit.run.test_erase import DiskRunner
    return DiskRunner({"pvs --reportformat": json.dumps({"report": [{"pv": []}]}),
                       "nvme id-ctrl": json.dumps({"oacs": 0x1e, "fna": fna, "cmic": 0}),
                       "nvme list-ns /dev/nvme0 --all": "[   0]:0x1\n[   1]:0x2\n",
                       "nvme get-ns-id /dev/nvme0n1": "nvme0n1: namespace-id:1\n",
                       "nvme get-ns-id /dev/nvme0n2": "nvme0n2: namespace-id:2\n"})


@pytest.mark.parametrize("fna", [0x1, 0x2, 0x3, 0x7])
def test_a_format_that_reaches_a_skipped_namespace_is_not_used(monkeypatch, tmp_path, fna):
    """Issue 52 item 2: with FNA bit 0 or 1 the controller formats (or secure-erases) every
    namespace, the one the operator skipped too; that namespace's erase falls through to
    the methods that act on it alone, and says why."""
    from provision_agent.drivers import wipe
    from provision_agent.run.events import Events
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    monkeypatch.setattr(secure_erase, "discard_bytes", lambda disk: 0)
    r = _nvme_runner(fna)
    path = tmp_path / "events.jsonl"
    events = Events([open(path, "w")])
    report = erase.erase({"method": "express",
                          "skip_block_devices": [{"name": "/dev/nvme0n2"}]},
                         r, events, disks=NVME_DISKS, mounted={}, swaps=[])
    events.close()
    assert report["erased"] == ["/dev/nvme0n1"]
    assert not [c for c in r.lines() if c.startswith("nvme format")], r.lines()
    assert report["methods"] == {"/dev/nvme0n1": "metadata"}
    said = [json.loads(line)["description"] for line in path.read_text().splitlines()
            if '"erase_device"' in line and '"done"' in line]
    assert "applies to every namespace of its subsystem" in said[0], said
    assert "namespace ID 2 there is not being erased" in said[0], said


def test_a_format_that_reaches_only_namespaces_being_erased_is_used(monkeypatch):
    from provision_agent.drivers import wipe
    from provision_agent.run.events import Events
    monkeypatch.setattr(wipe, "zero_edges", lambda device: None)
    monkeypatch.setattr(secure_erase, "discard_bytes", lambda disk: 0)
    r = _nvme_runner(0x3)
    report = erase.erase({"method": "express"}, r, Events([]), disks=NVME_DISKS, mounted={},
                         swaps=[])
    assert report["methods"] == {"/dev/nvme0n1": "nvme_user_data",
                                 "/dev/nvme0n2": "nvme_user_data"}
    # and a controller whose format names one namespace formats it while another is skipped
    r = _nvme_runner(0x0)
    report = erase.erase({"method": "express", "skip_block_devices": [{"name": "/dev/nvme0n2"}]},
                         r, Events([]), disks=NVME_DISKS, mounted={}, swaps=[])
    assert report["methods"] == {"/dev/nvme0n1": "nvme_user_data"}
    assert [c for c in r.lines() if c.startswith("nvme format")] == [
        "nvme format /dev/nvme0n1 --ses=1 --force --timeout=3600000"]
