"""The many-disks benchmark reads its numbers from provision's own log and events
(benchmarks/many_disks.py): discovery's seconds, every udev settle, mdadm --create, the steps."""

import json

from benchmarks import many_disks

LOG = """\
2026-11-28 21:26:54,913 INFO provision_agent.run.runner: run: udevadm settle --timeout=120
2026-11-28 21:26:55,013 DEBUG provision_agent.run.runner: exit 0 after 0.10s: udevadm
2026-11-28 21:26:55,600 DEBUG provision_agent.drivers.discovery: discovered 27 disks in 0.60s: a
2026-11-28 21:27:22,128 INFO provision_agent.run.runner: run: udevadm settle --timeout=120
2026-11-28 21:28:17,159 DEBUG provision_agent.run.runner: exit 0 after 55.01s: udevadm
2026-11-28 21:28:20,000 INFO provision_agent.run.runner: run: mdadm --create /dev/md/data --run
2026-11-28 21:28:29,210 DEBUG provision_agent.run.runner: exit 0 after 9.21s: mdadm
2026-11-28 21:28:29,300 INFO provision_agent.run.runner: run: mdadm --detail --brief /dev/md/data
2026-11-28 21:28:29,440 DEBUG provision_agent.run.runner: exit 0 after 0.14s: mdadm
"""


def test_discovery_settles_and_md_create_from_the_log():
    assert many_disks.discovery_seconds(LOG) == (27, 0.6)
    tools = many_disks.tool_seconds(LOG)
    assert [s for cmd, s in tools if cmd == ("udevadm", "settle")] == [0.1, 55.01]
    assert [s for cmd, s in tools if cmd == ("mdadm", "--create")] == [9.21]
    assert many_disks.discovery_seconds("no such line") == (None, None)


def test_step_seconds_from_the_events_file_and_the_table_ratios():
    events = "\n".join(json.dumps(e) for e in [
        {"event": "step", "kind": "wipe", "status": "start"},
        {"event": "step", "kind": "wipe", "status": "done", "seconds": 0.5},
        {"event": "step", "kind": "wipe", "status": "done", "seconds": 0.25},
        {"event": "progress", "step": 3, "bytes": 1}])
    assert many_disks.step_seconds(events) == {"wipe": [0.5, 0.25]}
    rows = [(3, {"settle sum": 2.0, "settle count": 4, "init settle gave up": False}),
            (24, {"settle sum": 20.0, "settle count": 8, "init settle gave up": True})]
    text = many_disks.table(rows)
    assert "20.00 (10.0x)" in text and "8 (2.0x)" in text
    assert text.splitlines()[-1].split()[-2:] == ["False", "True"]
