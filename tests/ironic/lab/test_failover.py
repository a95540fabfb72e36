"""A conductor dies mid-deploy in the libvirt lab (`tox -e ironic-lab`): ironic-api and two
conductors over JSON-RPC on MariaDB (tests/ironic/conductors.py's quick failover settings)
deploy a machine that Ironic powers through Redfish and network-boots into our ramdisk. While
`provision` runs in the ramdisk, the conductor that owns the node is killed with SIGKILL. The
other one takes the node over, follows the same provision to its end (no second start, every
event recorded once), boots the installed system from disk, and it reaches its marker.

The stand-in version of every failover moment runs in CI (tests/ironic/integration/
test_failover.py); this is the one real machine.
"""

import time

import pytest

from tests.ironic import realenv
from tests.ironic.conftest import require
from tests.ironic.lab import env as lablib
from tests.vmbench import ensure_ramdisk

DEPLOY_TIMEOUT = 1200
NAME = "bios"


@pytest.fixture(scope="module")
def lab(test_os):
    require(not realenv.MariaDB.missing(), f"missing: {realenv.MariaDB.missing()}")
    with lablib.Lab(lablib.workdir(), ensure_ramdisk(), {NAME: "bios"},
                    lablib.provision_opts(DEPLOY_TIMEOUT), serve_dir=test_os,
                    conductors=2) as the_lab:
        yield the_lab


def _running(lab, uuid):
    node = lab.ironic.node(uuid)
    info = node["driver_internal_info"] or {}
    if info.get("provision_phase") == "running" and info.get("provision_events_count", 0) >= 2:
        return node
    assert node["provision_state"] in ("deploying", "wait call-back"), (
        node["provision_state"], node["last_error"])
    return None


def _conductor_logs(lab):
    texts = {}
    for host, conf in lab.ironic.conductor_confs:
        log = conf.replace(".conf", ".log")
        with open(log, errors="replace") as f:
            texts[host] = f.read()
    return texts


def test_a_conductor_killed_while_provision_runs_the_other_one_finishes(lab, test_os):
    dom = lab.domains[NAME]
    times = {}
    uuid = lab.enroll(NAME, provide_timeout=DEPLOY_TIMEOUT)
    lablib.set_instance_info(lab.ironic, uuid, lablib.instance_info(lab, test_os, "bios"))
    console_at = len(dom.console_text())
    t = time.monotonic()
    lab.ironic.set_state(uuid, "active")
    at_kill = realenv.wait_for(lambda: _running(lab, uuid), DEPLOY_TIMEOUT, interval=1,
                               what="provision running in the ramdisk")
    times["deploy to provision running"] = time.monotonic() - t
    owner = at_kill["conductor"]
    survivor, = {host for host, _ in lab.ironic.conductor_confs} - {owner}
    lab.ironic.kill_conductor(owner)
    killed = time.monotonic()

    taken = realenv.wait_for(
        lambda: (lambda n: n if n["conductor"] == survivor else None)(lab.ironic.node(uuid)),
        120, interval=0.5, what=f"{survivor} owning the node")
    times["kill to takeover"] = time.monotonic() - killed
    assert taken["provision_state"] == "wait call-back", taken["provision_state"]
    node = lablib.wait_state(lab.ironic, uuid, ["active"], DEPLOY_TIMEOUT)
    times["kill to active"] = time.monotonic() - killed
    dii = node["driver_internal_info"]
    assert dii["provision_exit_code"] == 0 and node["last_error"] is None

    # provision ran once: one start, logged by the dead conductor, none by the survivor
    logs = _conductor_logs(lab)
    starts = {host: text.count(f"provision started on node {uuid}")
              for host, text in logs.items()}
    assert starts == {owner: 1, survivor: 0}, starts
    # every event recorded once, in order: the record holds them all (events_kept 500)
    events = dii["provision_events"]
    assert dii["provision_events_count"] == len(events) > at_kill["driver_internal_info"][
        "provision_events_count"]
    assert events[:len(at_kill["driver_internal_info"]["provision_events"])] == \
        at_kill["driver_internal_info"]["provision_events"]
    steps = [(e["index"], e["status"]) for e in events if e["event"] == "step"]
    assert len(steps) == len(set(steps)), steps
    count = next(e["count"] for e in events if e["event"] == "step")
    assert sorted(i for i, status in steps if status == "done") == list(range(1, count + 1))
    assert [e["status"] for e in events if e["event"] == "result"] == ["ok"]

    # the survivor booted the installed system from disk
    t = time.monotonic()
    m = dom.wait_console(lablib.MARKER, 900, since=console_at)
    times["instance boot to marker"] = time.monotonic() - t
    assert m.group(1) != "none", "the installed system did not find its configdrive"
    lablib.report_times("failover", times)
