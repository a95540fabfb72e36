"""The layout benchmark's breakdown of a provision run (benchmarks/layout_phases.py): every
second between the process start and its end lands in exactly one phase."""

from benchmarks import layout_phases

LOG = """\
2026-11-25 07:50:00,500 INFO provision_agent.cli.main: provision 0.1.0
2026-11-25 07:50:01,000 INFO provision_agent.run.runner: run: lsblk --json /dev/vda
2026-11-25 07:50:01,200 DEBUG provision_agent.run.runner: exit 0 after 0.20s: lsblk
plan text that continues a line
2026-11-25 07:50:02,000 INFO provision_agent.run.executor: step 1/3: wipe old signatures on /dev/vda
2026-11-25 07:50:02,000 INFO provision_agent.run.runner: run: wipefs --all --force /dev/vda
2026-11-25 07:50:02,500 DEBUG provision_agent.run.runner: exit 0 after 0.50s: wipefs
2026-11-25 07:50:03,000 INFO provision_agent.run.executor: step 2/3: re-read partition tables
2026-11-25 07:50:03,000 INFO provision_agent.run.runner: run: udevadm settle --timeout=120
2026-11-25 07:50:04,000 DEBUG provision_agent.run.runner: exit 0 after 1.00s: udevadm
2026-11-25 07:50:04,000 INFO provision_agent.run.runner: run: partprobe /dev/vda
2026-11-25 07:50:04,100 DEBUG provision_agent.run.runner: exit 1 after 0.25s: partprobe
2026-11-25 07:50:06,000 INFO provision_agent.run.executor: step 3/3: unmount
"""


def test_every_second_lands_in_one_phase():
    t = layout_phases._seconds("2026-11-25 07:50:00,000")
    phases = layout_phases.breakdown(LOG, t, t + 7.0)
    assert phases["start-up"] == 0.5
    assert round(phases["preparation"], 3) == 1.5     # the lsblk before step 1 is not a step's
    assert phases["tools"] == 0.75 and phases["udev settle"] == 1.0
    assert round(phases["python in steps"], 3) == 2.25
    assert round(phases["after steps"], 3) == 1.0
    assert round(sum(phases.values()), 3) == 7.0


def test_table_has_a_row_per_layout_with_its_total_and_replay():
    text = layout_phases.table([("single-disk.json", {"tools": 3.0, "start-up": 1.0}, 2.5)])
    row = text.splitlines()[1]
    assert row.startswith("single-disk.json") and row.split()[-2:] == ["4.0", "2.5"]


def test_the_replay_feeds_a_logged_stdin_as_a_here_document():
    from benchmarks.layouts_vs_shell import script_of
    log = "\n".join([
        "2026-11-25 19:00:00,000 INFO provision_agent.run.executor: step 1/2: new table",
        "2026-11-25 19:00:00,001 INFO provision_agent.run.runner: run: sfdisk --quiet /dev/vda"
        " < stdin",
        '2026-11-25 19:00:00,002 DEBUG provision_agent.run.runner: stdin of sfdisk: '
        '"label: dos\\n/dev/vda1 : start=2048, size=2048\\n"',
        "2026-11-25 19:00:00,500 DEBUG provision_agent.run.runner: exit 0 after 0.50s: sfdisk",
        "2026-11-25 19:00:00,600 INFO provision_agent.run.runner: run: wipefs --all /dev/vda1",
        "2026-11-25 19:00:00,700 DEBUG provision_agent.run.runner: exit 1 after 0.10s: wipefs"])
    assert script_of(log).splitlines()[2:] == [
        "sfdisk --quiet /dev/vda <<'STDIN'", "label: dos", "/dev/vda1 : start=2048, size=2048",
        "STDIN", "wipefs --all /dev/vda1 || true"]


def test_tools_running_at_once_count_once():
    from benchmarks.layout_phases import _covered
    assert _covered([(0.0, 1.1), (0.05, 1.15), (2.0, 2.5)]) == 1.15 + 0.5
    assert _covered([(0.0, 3.0), (1.0, 2.0)]) == 3.0 and _covered([]) == 0.0


def test_the_replay_runs_tables_written_at_once_one_after_another_or_in_the_background():
    from benchmarks.layouts_vs_shell import script_of
    stamp = "2026-11-25 22:00:00,000"
    log = "\n".join(f"{stamp} {line}" for line in [
        "INFO provision_agent.run.executor: step 1/3: new gpt table on /dev/vda (one of 2 "
        "tables written at once)",
        "INFO provision_agent.run.executor: step 2/3: new msdos table on /dev/vdb (one of 2 "
        "tables written at once)",
        "INFO provision_agent.run.runner: run: sgdisk --clear /dev/vda",
        "INFO provision_agent.run.runner: run: sfdisk --quiet /dev/vdb < stdin",
        'DEBUG provision_agent.run.runner: stdin of sfdisk: "label: dos\\n"',
        "DEBUG provision_agent.run.runner: exit 0 after 1.10s: sgdisk",
        "DEBUG provision_agent.run.runner: exit 0 after 0.30s: sfdisk",
        "INFO provision_agent.run.executor: step 3/3: re-read partition tables",
        "INFO provision_agent.run.runner: run: udevadm settle"])
    assert script_of(log).splitlines()[2:] == [
        "sgdisk --clear /dev/vda", "sfdisk --quiet /dev/vdb <<'STDIN'", "label: dos", "STDIN",
        "udevadm settle"]
    assert script_of(log, at_once=True).splitlines()[2:] == [
        "sgdisk --clear /dev/vda &", "p0=$!",
        "{ sfdisk --quiet /dev/vdb <<'STDIN'", "label: dos", "STDIN", "} &", "p1=$!",
        "wait $p0", "wait $p1", "udevadm settle"]
