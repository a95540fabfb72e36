"""Where a deploy's and a cleaning's seconds went, for benchmarks/head_to_head.py: read from the
conductor's log (both sides leave the same INFO lines there: power actions, heartbeats at the
API, the steps it executes, state changes) and, for ours, from provision's own step events,
which the conductor keeps in driver_internal_info.

Phases are cut at consecutive boundaries, so they add up to the whole: nothing is counted
twice and no second is lost between two phases.
"""

import datetime
import re

LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) \d+ \w+ \S+ \[[^\]]*\] (.*)$")

# The deploy's boundaries, in order; a phase runs from its boundary to the next one.
DEPLOY_PHASES = (
    ("request", "request → power on"),
    ("power_on", "power on → ramdisk reachable (first heartbeat)"),
    ("heartbeat", "heartbeat → image write starts"),
    ("image_start", "image written"),
    ("image_end", "bootloader (and the rest of the agent's work)"),
    ("agent_done", "done → active"),
)
# With fast track (--fast-track) the deploy runs in the ramdisk the cleaning before it left
# running: no power on, no first heartbeat; the request goes straight to the image's steps.
FAST_DEPLOY_PHASES = (
    ("request", "request → image write starts (fast track: no power on, no boot)"),
    *DEPLOY_PHASES[3:],
)
CLEAN_PHASES = (
    ("request", "undeploy: request → power on for cleaning"),
    ("power_on", "cleaning: power on → first heartbeat"),
    ("heartbeat", "cleaning: heartbeat → steps done, powered off, available"),
)


def seconds(stamp):
    """A log time stamp as the host's epoch seconds (the log is in the host's local time)."""
    return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp()


def node_events(log_text, node):
    """(time, kind, detail) for every line about node: kind is state, power, heartbeat, step
    or provision_done; detail the new state, on/off, or the step's name."""
    patterns = (
        ("state", re.compile(rf'Node {node} moved to provision state "([^"]+)"')),
        ("power", re.compile(rf"Successfully set node {node} power state to power (on|off)")),
        ("heartbeat", re.compile(rf"POST /v1/heartbeat/{node} - 202()")),
        ("step", re.compile(rf"Executing \{{.*?'step': '(\w+)'.*\}} on node {node}$")),
        ("provision_done", re.compile(rf"provision (?:erase )?finished on node {node}()")),
        ("job_started", re.compile(rf"Node {node}: job started \d+\.\d+ s after()")),
    )
    found = []
    for line in log_text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        for kind, rx in patterns:
            hit = rx.search(m.group(2))
            if hit:
                found.append((seconds(m.group(1)), kind, hit.group(1)))
                break
    return found


def _first(events, kind, detail=None, after=0.0):
    for t, k, d in events:
        if k == kind and t >= after and (detail is None or d == detail):
            return t
    raise LookupError(f"no {kind} {detail or ''} after {after}")


def _cut(boundaries, names, end):
    times = [boundaries[key] for key, _ in names] + [end]
    return {label: times[i + 1] - times[i] for i, (_, label) in enumerate(names)}


def deploy_phases(events, side, provision_events=(), fast_track=False):
    """The deploy's phases, from the request (available → deploying) to active. side "ipa":
    Ironic's own steps mark the image (write_image) and the bootloader (prepare_instance_boot,
    then tear_down_agent); side "ours": provision's write_image step, start and done, then
    the conductor's "provision finished" line. fast_track: the ramdisk was running already,
    the phases go from the request to the image (a power on before it raises: not fast)."""
    b = {"request": _first(events, "state", "deploying")}
    if fast_track:
        b["heartbeat"] = b["request"]
    else:
        b["power_on"] = _first(events, "power", "on", b["request"])
        b["heartbeat"] = _first(events, "heartbeat", None, b["power_on"])
    active = _first(events, "state", "active", b["heartbeat"])
    if side == "ipa":
        b["image_start"] = _first(events, "step", "write_image", b["heartbeat"])
        b["image_end"] = _first(events, "step", "prepare_instance_boot", b["image_start"])
        b["agent_done"] = _first(events, "step", "tear_down_agent", b["image_end"])
    else:
        write = [e for e in provision_events
                 if e.get("event") == "step" and e.get("kind") == "write_image"]
        b["image_start"] = next(e["time"] for e in write if e["status"] == "start")
        b["image_end"] = next(e["time"] for e in write if e["status"] == "done")
        b["agent_done"] = _first(events, "provision_done", None, b["image_end"])
    if fast_track:
        powered = [t for t, k, d in events if k == "power" and b["request"] <= t < b["image_end"]]
        if powered:
            raise LookupError(f"a power action {powered[0] - b['request']:.1f} s after the "
                              "request: the deploy was not fast-tracked")
        return _cut(b, FAST_DEPLOY_PHASES, active)
    return _cut(b, DEPLOY_PHASES, active)


# The issue's own measure, "the seconds between the heartbeat and the first byte", cut alike
# on both sides: from the heartbeat (with fast track, the request) to the moment the agent
# opens the image's download, whose bytes it writes as they come. The phase table above cuts
# IPA's side where the conductor sends write_image, before IPA finds its install disk, and
# ours' where provision's write_image step starts, after the wipe and the partitioning: not
# alike. Each agent's part is timed by its own clock and added to the conductor's moment the
# agent was handed the job (host clock), so a skew between the clocks (the RTC gives a booted
# ramdisk whole seconds; IPA's was 0.7 s behind the host's on 2026-11-29) cancels: IPA, from
# its "Executing command: deploy.execute_deploy_step" of write_image (or prepare_image's own
# lines) to its "Attempting to download image from", on its console; ours, from the
# wrapper's start event to provision's write_image step. The hand-over's own network time is
# left out on both sides.
IPA_TAKEN = ("Executing command: standby.prepare_image",
             "Asynchronous command prepare_image started execution")
# Ironic 39 sends write_image as an agent deploy step, which runs prepare_image
IPA_STEP = "Executing command: deploy.execute_deploy_step"
IPA_DOWNLOAD = "Attempting to download image from"


def ipa_taken_to_download(console_text):
    """IPA's seconds, by its own log clock, from taking prepare_image to opening the image's
    download; None when its console does not show both."""
    taken = None
    for raw in console_text.splitlines():
        m = LINE.match(raw.strip())
        if not m:
            continue
        text = m.group(2)
        if taken is None and (text.startswith(IPA_TAKEN) or (
                text.startswith(IPA_STEP) and "'write_image'" in text[:200])):
            taken = seconds(m.group(1))
        elif taken is not None and text.startswith(IPA_DOWNLOAD):
            return seconds(m.group(1)) - taken
    return None


def ours_started_to_write(provision_events):
    """ours' seconds, by the ramdisk's clock, from the wrapper starting provision to its
    write_image step; None when the wrapper's event has no time (before 2026-11-29)."""
    started = next((e.get("time") for e in provision_events if e.get("event") == "wrapper"
                    and e.get("status") == "started"), None)
    write = next((e["time"] for e in provision_events if e.get("event") == "step"
                  and e.get("kind") == "write_image" and e.get("status") == "start"), None)
    if not isinstance(started, (int, float)) or write is None:
        return None
    return write - started


def first_byte(events, side, fast_track=False, provision_events=(), ipa_console=""):
    """Heartbeat (fast track: request) → the agent opens the image's download, cut alike on
    both sides: {"handed over": seconds to the conductor's hand-over, "agent": the agent's
    own seconds after it, "total"}; None when a side's logs do not show it."""
    begin = _first(events, "state", "deploying")
    if not fast_track:
        begin = _first(events, "heartbeat", None, _first(events, "power", "on", begin))
    try:
        handed = (_first(events, "step", "write_image", begin) if side == "ipa"
                  else _first(events, "job_started", None, begin))
    except LookupError:
        return None
    agent = (ipa_taken_to_download(ipa_console) if side == "ipa"
             else ours_started_to_write(provision_events))
    if agent is None:
        return None
    return {"handed over": handed - begin, "agent": agent, "total": handed - begin + agent}


def clean_phases(events, after):
    """Undeploy + automated cleaning, from the request (active → deleting) to available."""
    b = {"request": _first(events, "state", "deleting", after)}
    b["power_on"] = _first(events, "power", "on", b["request"])
    b["heartbeat"] = _first(events, "heartbeat", None, b["power_on"])
    available = _first(events, "state", "available", b["heartbeat"])
    return _cut(b, CLEAN_PHASES, available)


def ratios(ours, ipa):
    """ours/IPA per phase (None where IPA's is zero)."""
    return {k: (ours[k] / ipa[k] if ipa.get(k) else None) for k in ours}


def table(rows):
    """rows: [(phase, ipa_seconds, ours_seconds)] as a Markdown table with ours/IPA; ipa None
    where IPA has no entry (row 4)."""
    out = ["| phase | IPA (`direct`) s | ours (`provision`) s | ours/IPA |",
           "|---|---:|---:|---:|"]
    for phase, ipa, ours in rows:
        ratio = f"{ours / ipa:.2f}" if ipa else "—"
        shown = "—" if ipa is None else f"{ipa:.1f}"
        out.append(f"| {phase} | {shown} | {ours:.1f} | {ratio} |")
    return "\n".join(out)
