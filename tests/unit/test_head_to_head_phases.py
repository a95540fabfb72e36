"""The head-to-head benchmark's phases (benchmarks/head_to_head_phases.py), from conductor log
lines as Ironic 39 writes them: each side's deploy and cleaning add up to the whole, with
every boundary where that side's own lines put it."""

import pytest

from benchmarks import head_to_head_phases as hp

NODE = "3547f1eb-bdf3-45fa-b5ff-4e73aabd5991"
OTHER = "00000000-bdf3-45fa-b5ff-4e73aabd5991"
REQ = "[None req-1 - - - - - -]"


def line(stamp, module, text):
    return f"2026-11-26 22:{stamp} 12939 INFO {module} {REQ} {text}"


def state(stamp, new, old):
    return line(stamp, "ironic.conductor.task_manager",
                f'Node {NODE} moved to provision state "{new}" from state "{old}"; target '
                f'provision state is "active"')


def step(stamp, name, node=NODE):
    return line(stamp, "ironic.conductor.deployments",
                f"Executing {{'step': '{name}', 'priority': 80, 'interface': 'deploy'}} on node "
                f"{node}")


def power(stamp, on_off):
    return line(stamp, "ironic.conductor.utils",
                f"Successfully set node {NODE} power state to power {on_off} by rebooting.")


def heartbeat(stamp, node=NODE):
    return line(stamp, "ironic.api", f"10.0.0.5 - POST /v1/heartbeat/{node} - 202 (38.92ms)")


IPA_LOG = "\n".join([
    state("00:00.000", "deploying", "available"),
    line("00:00.100", "ironic.conductor.deployments",
         f"Executing automated cleaning on node {NODE}, remaining steps: []"),
    power("00:05.000", "on"),
    heartbeat("00:50.000", OTHER),
    step("00:52.000", "write_image", OTHER),
    heartbeat("01:05.000"),
    step("01:06.000", "write_image"),
    "a continuation line that is no log line",
    heartbeat("01:40.000"),
    step("01:41.000", "prepare_instance_boot"),
    step("01:45.000", "tear_down_agent"),
    power("01:55.000", "off"),
    power("01:58.000", "on"),
    state("02:00.000", "active", "deploying"),
    state("03:00.000", "deleting", "active"),
    power("03:04.000", "off"),
    power("03:10.000", "on"),
    heartbeat("04:00.000"),
    state("04:30.000", "available", "cleaning"),
])


def test_ipa_deploy_phases_are_cut_at_its_steps_and_add_up():
    events = hp.node_events(IPA_LOG, NODE)
    phases = hp.deploy_phases(events, "ipa")
    assert list(phases.values()) == pytest.approx([5, 60, 1, 35, 4, 15])
    assert sum(phases.values()) == pytest.approx(120)
    assert list(phases) == [label for _, label in hp.DEPLOY_PHASES]


def test_cleaning_runs_from_the_undeploy_request_to_available():
    events = hp.node_events(IPA_LOG, NODE)
    phases = hp.clean_phases(events, after=hp.seconds("2026-11-26 22:02:00.000"))
    assert list(phases.values()) == pytest.approx([10, 50, 30])


def _ours_log(stamp, module, text):
    """ours' deploy: requested at 0 s, powered on at 3 s, heard at 40 s, active at 90 s, and
    the conductor's one line between."""
    return "\n".join([
        state("00:00.000", "deploying", "available"), power("00:03.000", "on"),
        heartbeat("00:40.000"), line(stamp, module, text),
        state("01:30.000", "active", "deploying")])


def test_ours_takes_the_image_from_provision_events_and_the_end_from_the_conductor():
    log = _ours_log("01:20.500", "ironic_driver.conversation.follow",
                    f"provision finished on node {NODE}; resuming the deploy steps")
    t0 = hp.seconds("2026-11-26 22:00:00.000")
    events = [{"event": "step", "kind": "wipe", "status": "start", "time": t0 + 42},
              {"event": "step", "kind": "write_image", "status": "start", "time": t0 + 45},
              {"event": "progress", "step": 2, "bytes": 1, "time": t0 + 50},
              {"event": "step", "kind": "write_image", "status": "done", "time": t0 + 70}]
    phases = hp.deploy_phases(hp.node_events(log, NODE), "ours", events)
    assert list(phases.values()) == pytest.approx([3, 37, 5, 25, 10.5, 9.5])


def test_a_missing_boundary_says_which():
    with pytest.raises(LookupError, match="heartbeat"):
        hp.deploy_phases(hp.node_events(state("00:00.000", "deploying", "available") + "\n"
                                        + power("00:01.000", "on"), NODE), "ipa")


# --fast-track: IPA's deploy in the ramdisk the cleaning before it left running (Ironic's
# `deploy` step refreshes the steps and goes on: no power action, no wait for a heartbeat)
IPA_FAST_LOG = "\n".join([
    state("00:00.000", "deploying", "available"),
    step("00:01.000", "deploy"),
    heartbeat("00:20.000"),
    step("00:21.000", "write_image"),
    step("01:01.000", "prepare_instance_boot"),
    step("01:04.000", "tear_down_agent"),
    power("01:10.000", "off"),
    power("01:12.000", "on"),
    state("01:15.000", "active", "deploying"),
])


def test_a_fast_tracked_deploy_runs_from_the_request_to_the_image():
    phases = hp.deploy_phases(hp.node_events(IPA_FAST_LOG, NODE), "ipa", fast_track=True)
    assert list(phases) == [label for _, label in hp.FAST_DEPLOY_PHASES]
    assert list(phases.values()) == pytest.approx([21, 40, 3, 11])
    assert sum(phases.values()) == pytest.approx(75)


def test_a_power_on_before_the_image_is_no_fast_track():
    log = IPA_FAST_LOG.replace(step("00:01.000", "deploy"), power("00:01.000", "on"))
    with pytest.raises(LookupError, match="not fast-tracked"):
        hp.deploy_phases(hp.node_events(log, NODE), "ipa", fast_track=True)


def test_the_fast_track_report_sums_from_the_request():
    from benchmarks import head_to_head
    side = {"deploy": {label: 10.0 for _, label in hp.FAST_DEPLOY_PHASES},
            "request_to_active": 40.0, "instance boot to marker (from active)": 30.0,
            "cleaning": {label: 4.0 for _, label in hp.CLEAN_PHASES}, "cleaning_total": 12.0}
    ours = dict(side, request_to_active=20.0)
    text = head_to_head.report({"fast_track": True, "sides": {"ipa": side, "ours": ours}})
    assert "| **request → active (fast track)** | 40.0 | 20.0 | 0.50 |" in text
    assert "power on → active" not in text


def test_table_gives_ours_over_ipa():
    text = hp.table([("image written", 40.0, 20.0), ("zero", 0.0, 1.0)])
    assert "| image written | 40.0 | 20.0 | 0.50 |" in text
    assert "| zero | 0.0 | 1.0 | — |" in text


def test_the_report_puts_both_sides_of_one_run_side_by_side():
    from benchmarks import head_to_head
    side = {"deploy": {label: 10.0 for _, label in hp.DEPLOY_PHASES},
            "power_on_to_active": 50.0, "instance boot to marker (from active)": 30.0,
            "cleaning": {label: 4.0 for _, label in hp.CLEAN_PHASES}, "cleaning_total": 12.0}
    ours = dict(side, power_on_to_active=25.0)
    text = head_to_head.report({"sides": {"ipa": side, "ours": ours}})
    assert "| **power on → active** | 50.0 | 25.0 | 0.50 |" in text
    assert "| image written | 10.0 | 10.0 | 1.00 |" in text
    assert text.count("\n") == 2 + len(hp.DEPLOY_PHASES) + 2 + len(hp.CLEAN_PHASES)


def test_the_image_cache_key_follows_the_inputs_not_where_they_are_served():
    from benchmarks import head_to_head_image as img
    a = img.key("bios", "/c/test-os-69adaf71eb300789")
    assert a == img.key("bios", "/elsewhere/test-os-69adaf71eb300789")
    assert a != img.key("bios", "/c/test-os-0000000000000000")
    assert img.key("uefi", "/c/test-os-69adaf71eb300789") != a
    with pytest.raises(ValueError, match="bios or uefi"):
        img.key("uefi-secureboot", "/c/test-os-69adaf71eb300789")


def test_row_4_has_no_ipa_column_and_no_ratio():
    from benchmarks import head_to_head
    ours = {"deploy": {label: 10.0 for _, label in hp.DEPLOY_PHASES},
            "power_on_to_active": 50.0, "instance boot to marker (from active)": 30.0,
            "cleaning": {label: 4.0 for _, label in hp.CLEAN_PHASES}, "cleaning_total": 12.0}
    text = head_to_head.report({"sides": {"ours": ours}})
    assert "| **power on → active** | — | 50.0 | — |" in text


class _Images:
    def url(self, name):
        return f"http://lab/{name}"


@pytest.mark.parametrize("row", [1, 2, 3, 4])
def test_each_row_asks_both_sides_for_the_same_instance(tmp_path, row):
    import json

    from benchmarks import head_to_head
    manifest = {"file": "root.ext4", "sha256": "ab" * 32, "kernel": "vmlinuz",
                "ramdisk": "initrd.img"}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    lab = type("Lab", (), {"images": _Images()})()
    info = head_to_head.instance_info(lab, tmp_path, row)
    assert info["image_source"] == "http://lab/root.ext4"
    assert info.get("image_type") == (None if row == 1 else "partition")
    # Ironic's software RAID has no swap partition (ours puts / on the whole array)
    assert ("swap_mb" in info) == (row in (2, 4))
    assert ("provision_layout" in info) == (row == 4)
    assert head_to_head.ROW_SIDES[row] == (("ours",) if row == 4 else ("ipa", "ours"))


def _ipa_console(taken, download):
    """IPA's console as its log writes it (its own clock, here 2 s behind the host's)."""
    return "\r\n".join([
        "ipa-ramdisk: [12.3] starting ironic-python-agent",
        "2026-11-26 22:00:10.000 412 DEBUG ironic_python_agent.extensions.base [-] Executing "
        "command: deploy.get_deploy_steps with args: {'node': {}}",
        f"2026-11-26 22:{taken} 412 DEBUG ironic_python_agent.extensions.base [-] Executing "
        "command: deploy.execute_deploy_step with args: {'step': {'interface': 'deploy', "
        "'step': 'write_image', 'args': {'image_info': {}}}}",
        f"2026-11-26 22:{taken} 412 INFO ironic_python_agent.extensions.base [-] Asynchronous "
        "command prepare_image started execution",
        "a continuation line of a long argument",
        f"2026-11-26 22:{download} 412 INFO ironic_python_agent.extensions.standby [-] "
        "Attempting to download image from http://lab/disk.raw"])


def test_the_first_byte_is_cut_alike_by_each_agents_own_clock():
    """The conductor's hand-over by the host's clock, then the agent's own seconds by its
    clock: a skewed ramdisk clock changes nothing."""
    ipa = hp.first_byte(hp.node_events(IPA_FAST_LOG, NODE), "ipa", fast_track=True,
                        ipa_console=_ipa_console("00:19.000", "00:20.250"))
    assert ipa == pytest.approx({"handed over": 21, "agent": 1.25, "total": 22.25})
    log = _ours_log("00:42.500", "ironic_driver.conversation.starting",
                    f"Node {NODE}: job started 2.300 s after the heartbeat (to_look 0.2 s)")
    skewed = hp.seconds("2026-11-26 22:00:00.000") - 0.7
    events = [{"event": "wrapper", "status": "started", "pid": 7, "time": skewed + 42},
              {"event": "step", "kind": "wipe", "status": "start", "time": skewed + 43},
              {"event": "step", "kind": "write_image", "status": "start", "time": skewed + 45}]
    ours = hp.first_byte(hp.node_events(log, NODE), "ours", provision_events=events)
    assert ours == pytest.approx({"handed over": 2.5, "agent": 3, "total": 5.5})


def test_no_first_byte_without_the_agents_own_times():
    assert hp.first_byte(hp.node_events(IPA_FAST_LOG, NODE), "ipa", fast_track=True,
                         ipa_console="no log here") is None
    old = [{"event": "wrapper", "status": "started", "pid": 7},
           {"event": "step", "kind": "write_image", "status": "start", "time": 5.0}]
    assert hp.ours_started_to_write(old) is None
