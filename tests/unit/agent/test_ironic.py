"""provision-ironic-agent's lookup/heartbeat loop against a scripted API (the real Ironic is
in tests/ironic/integration/test_heartbeat.py)."""

import json
import logging
import os
import stat

import pytest

from provision_agent import binding
from provision_agent.agent import api
from provision_agent.agent import ironic as agent_mod
from tests.unit.fake_http import Resp, Session

NODE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
OTHER_NODE = "2be26c0b-03f2-4d2e-ae87-c02d7f33c456"


@pytest.fixture(autouse=True)
def binding_dir(tmp_path, monkeypatch):
    """Every agent of these tests writes its binding here, never into this host's /run."""
    path = str(tmp_path / "binding")
    monkeypatch.setattr(agent_mod, "DEFAULT_BINDING_DIR", path)
    return path


def _agent(script, **kw):
    session = Session(script)
    agent = agent_mod.Agent("http://192.0.2.1:6385/", ["52:54:00:aa:bb:01"],
                            host_key="ssh-ed25519 AAAA", address="192.0.2.50",
                            session=session, binding_dir=agent_mod.DEFAULT_BINDING_DIR, **kw)
    return agent, session


def _run(agent, session, between=None):
    """Runs the loop until the scripted answers are used up; the pauses it chose.
    between(): what happens in the ramdisk during each pause."""
    pauses = []

    def pause(seconds, stop, sleep, before=None):
        pauses.append(seconds)
        if between:
            between()
    agent._pause = pause
    agent.run(stop=lambda: not session.script, sleep=pauses.append)
    return pauses


def test_lookup_until_deploying_then_heartbeat_with_token_and_key(caplog):
    token = "s3cret-token-value"
    agent, session = _agent([
        Resp(404), Resp(409, {"error_message": "locked"}),
        Resp(200, {"node": {"uuid": NODE}, "config": {"agent_token": token}}),
        Resp(202), Resp(202)])
    with caplog.at_level(logging.DEBUG):
        slept = _run(agent, session)
    methods = [(m, u.rsplit("/v1", 1)[1]) for m, u, _ in session.sent]
    assert methods == [("GET", "/lookup")] * 3 + [("POST", "/heartbeat/" + NODE)] * 2
    assert session.sent[0][2]["params"] == {"addresses": "52:54:00:aa:bb:01"}
    body = session.sent[3][2]["json"]
    assert body["agent_token"] == token
    assert body["callback_url"] == "https://192.0.2.50:22"
    assert body["agent_verify_ca"] == "ssh-ed25519 AAAA"
    assert session.sent[3][2]["headers"]["X-OpenStack-Ironic-API-Version"] == "1.72"
    assert "agent_status" not in body
    assert slept and all(s > 0 for s in slept)
    assert token not in caplog.text


def test_lookup_binds_the_ramdisk_to_its_node_root_only(binding_dir):
    agent, _session = _agent([
        Resp(200, {"node": {"uuid": NODE}, "config": {"agent_token": "t-1"}}),
        Resp(200, {"node": {"uuid": OTHER_NODE}, "config": {"agent_token": "t-2"}})])
    agent.lookup()
    path = os.path.join(binding_dir, NODE)
    with open(path, "rb") as f:
        data = f.read()
    binding.check(data, NODE, "t-1")                      # what the conductor does
    assert "t-1" not in data.decode()                     # an HMAC, not the token
    for wrong_node, wrong_token in ((OTHER_NODE, "t-1"), (NODE, "t-2")):
        with pytest.raises(binding.Mismatch):
            binding.check(data, wrong_node, wrong_token)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(binding_dir).st_mode) == 0o700
    # Re-enrolled as another node during the same boot: only the new binding is left.
    agent.lookup()
    assert os.listdir(binding_dir) == [OTHER_NODE]
    assert json.loads(open(os.path.join(binding_dir, OTHER_NODE)).read())["node_uuid"] \
        == OTHER_NODE


def test_a_binding_that_cannot_be_written_stops_the_agent(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    agent, _session = _agent([
        Resp(200, {"node": {"uuid": NODE}, "config": {"agent_token": "t-1"}})])
    agent.binding_dir = str(blocker)
    with pytest.raises(api.AgentError, match="cannot write the node binding"):
        agent.lookup()
    assert agent.node is None


def test_a_token_handed_out_before_is_explained_and_not_used():
    agent, session = _agent([
        Resp(200, {"node": {"uuid": NODE}, "config": {"agent_token": "******"}})])
    with pytest.raises(api.NotYet, match="earlier lookup"):
        agent.lookup()


def test_a_pregenerated_token_from_the_command_line_is_kept():
    agent, session = _agent([
        Resp(200, {"node": {"uuid": NODE}, "config": {"agent_token": "******"}}),
        Resp(202)], token="from-vmedia")
    agent.lookup()
    assert agent.heartbeat()
    assert session.sent[1][2]["json"]["agent_token"] == "from-vmedia"


def test_fast_tracked_inspection_heartbeats_with_the_token_the_inventory_got(
        tmp_path, monkeypatch):
    """Fast track: Ironic puts ipa-api-url beside the inspection callback and hands the agent
    token out with its answer to the inventory; the lookup after it gets the token hidden.
    The lab's inspection ramdisk looked up every 10 s and never heartbeated without this."""
    from provision_agent.agent import inspection
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("ipa-inspection-callback-url=http://192.0.2.1:6385/v1/"
                       "continue_inspection ipa-api-url=http://192.0.2.1:6385\n")
    key = tmp_path / "k.pub"
    key.write_text("ssh-ed25519 AAAA c\n")
    session = Session([
        Resp(202, {"node": {"uuid": NODE}, "config": {"agent_token": "from-inspection"}}),
        Resp(200, {"node": {"uuid": NODE}, "config": {"agent_token": "******"}}),
        Resp(202)])
    monkeypatch.setattr(agent_mod.requests, "Session", lambda: session)
    monkeypatch.setattr(inspection, "collect", lambda bootif=None: {"disks": []})
    beats = []

    def run(agent):
        agent.lookup()
        beats.append(agent.heartbeat())
    monkeypatch.setattr(agent_mod.Agent, "run", run)
    assert agent_mod.main(["--cmdline_file", str(cmdline), "--host_key_file", str(key),
                           "--mac", "52:54:00:aa:bb:01", "--address", "192.0.2.50"]) == 0
    assert beats == [True]
    assert session.sent[-1][2]["json"]["agent_token"] == "from-inspection"


def test_a_refused_heartbeat_looks_up_again_and_backs_off():
    agent, session = _agent([
        Resp(200, {"node": {"uuid": NODE}, "config": {"agent_token": "t"}}),
        Resp(400, {"error_message": "Invalid or missing agent token received."}),
        Resp(200, {"node": {"uuid": NODE}, "config": {"agent_token": "t2"}}),
        Resp(400, {"error_message": "again"})])
    slept = _run(agent, session)
    assert [m for m, _, _ in session.sent] == ["GET", "POST", "GET", "POST"]
    assert slept[1] > slept[0] * 1.2     # 2 s, then 4 s (with at most 20 % jitter)


def _exit_code(job_dir, node=NODE):
    """What the conductor's wrapper does when provision exits: a rename into place."""
    os.makedirs(os.path.join(job_dir, node), exist_ok=True)
    tmp = os.path.join(job_dir, node, "exit_code.tmp")
    with open(tmp, "w") as f:
        f.write("0\n")
    os.rename(tmp, os.path.join(job_dir, node, "exit_code"))


def test_the_heartbeat_after_the_job_exited_says_end_once_per_exit(tmp_path):
    job_dir = str(tmp_path / "job")
    agent, session = _agent([
        Resp(200, {"node": {"uuid": NODE}, "config": {"agent_token": "t"}}),
        Resp(202), Resp(202), Resp(409), Resp(202), Resp(202), Resp(202), Resp(202)],
        job_dir=job_dir)
    exits_after = {1: lambda: _exit_code(job_dir), 4: lambda: _exit_code(job_dir)}
    count = iter(range(100))
    _run(agent, session, between=lambda: exits_after.get(next(count), lambda: None)())
    statuses = [sent[2]["json"].get("agent_status") for sent in session.sent[1:]]
    # the second pause saw the exit: "end" until one is accepted (409: node busy), then no
    # more until the job exits again (a new file: the wrapper renames it into place)
    assert statuses == [None, None, "end", "end", None, "end", None]


def test_a_pause_ends_when_the_job_exits_not_for_an_exit_already_pending(tmp_path):
    job_dir = str(tmp_path / "job")
    agent, _session = _agent([], job_dir=job_dir)
    agent.node = NODE
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        if len(slept) == 3 and not os.path.exists(job_dir):
            _exit_code(job_dir)
    agent._pause(60, stop=lambda: False, sleep=sleep)
    assert slept == [agent_mod.WATCH_EVERY] * 3          # not 60 s: the exit goes at once
    slept.clear()
    # its heartbeat refused: wait it out
    agent._pause(5, stop=lambda: False, sleep=sleep, before=agent.watch.pending(NODE))
    assert sum(slept) == 5


def test_an_exit_while_a_heartbeat_was_on_its_way_is_said_at_the_next_watch_tick(tmp_path):
    """The job exited while a heartbeat decided without it was being posted (accepted): the
    pause after it must end at the exit, not treat it as one already said. In the lab's row 2
    (2026-11-29) the exit came 1 s before such a heartbeat was accepted; the pause waited its
    26 s out and the conductor learnt of the exit from its own poll 25 s late."""
    job_dir = str(tmp_path / "job")
    agent, session = _agent([
        Resp(200, {"node": {"uuid": NODE}, "config": {"agent_token": "t"}}),
        Resp(202), Resp(202)], job_dir=job_dir)
    post, slept, paused = session.request, [], []

    def request(method, url, **kwargs):
        if method == "POST" and len(session.sent) == 1:    # the first heartbeat's POST
            _exit_code(job_dir)
        if method == "POST" and len(session.sent) == 2:    # the second: how long after
            paused.append(sum(slept))
        return post(method, url, **kwargs)
    session.request = request
    agent.run(stop=lambda: not session.script, sleep=slept.append)
    statuses = [sent[2]["json"].get("agent_status") for sent in session.sent[1:]]
    assert statuses == [None, "end"]
    # one watch tick after the first heartbeat, not its whole pause (STARTUP_PAUSES[0] s)
    assert paused == [agent_mod.WATCH_EVERY]


def test_a_node_name_that_is_not_a_uuid_is_never_a_path(tmp_path):
    from provision_agent.agent import job_watch
    watch = job_watch.ExitWatch(str(tmp_path))
    _exit_code(str(tmp_path), node="x")
    (tmp_path / "exit_code").write_text("0")
    assert watch.pending("x") is None and watch.pending("..") is None
    _exit_code(str(tmp_path))
    assert watch.pending(NODE) is not None


def test_main_without_an_api_url_exits_2_and_says_why(tmp_path, caplog):
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("console=ttyS0 rdinit=/init\n")
    assert agent_mod.main(["--cmdline_file", str(cmdline)]) == 2
    assert "ipa-api-url is not on the kernel command line" in caplog.text


def test_main_refuses_a_non_http_url_without_echoing_credentials(tmp_path, caplog):
    cmdline = tmp_path / "cmdline"
    cmdline.write_text("ipa-api-url=ftp://user:pw@host/\n")
    key = tmp_path / "k.pub"
    key.write_text("ssh-ed25519 AAAA c\n")
    assert agent_mod.main(["--cmdline_file", str(cmdline), "--host_key_file", str(key),
                           "--mac", "52:54:00:aa:bb:01"]) == 2
    assert "not an http(s) URL" in caplog.text and "pw" not in caplog.text


def test_an_answer_larger_than_a_node_record_is_not_read_whole():
    huge = b'{"node": {"uuid": "' + b"x" * (api.MAX_ANSWER + 10) + b'"}}'
    agent, session = _agent([Resp(200, raw_body=huge)])
    with pytest.raises(api.NotYet, match="larger than 1048576 bytes"):
        agent.lookup()
    assert session.sent[0][2]["stream"] is True
    assert session.sent[0][2]["headers"]["Accept-Encoding"] == "identity"


@pytest.mark.parametrize("line,said", [
    # Python's own parse raised "Invalid IPv6 URL" out of main, a traceback with no place
    ("ipa-api-url=http://[fd00::1:6385",
     "ipa-api-url: the IPv6 literal '[fd00::1:6385' has no closing ']'"),
    ("ipa-api-url=http://[fd00::1]:6385 ipa-inspection-callback-url=http://[fd00::zz]/v1",
     "ipa-inspection-callback-url: [fd00::zz] is not an IPv6 address"),
    ("ipa-api-url=http://fd00::1:6385", "ipa-api-url: 'fd00::1:6385' looks like an IPv6 "
                                        "address: in a URL it goes in brackets"),
], ids=["unclosed", "bad-literal", "no-brackets"])
def test_main_refuses_a_malformed_ipv6_literal_with_its_place(tmp_path, caplog, line, said):
    cmdline = tmp_path / "cmdline"
    cmdline.write_text(line + "\n")
    key = tmp_path / "k.pub"
    key.write_text("ssh-ed25519 AAAA c\n")
    assert agent_mod.main(["--cmdline_file", str(cmdline), "--host_key_file", str(key),
                           "--mac", "52:54:00:aa:bb:01"]) == 2
    assert said in caplog.text


def test_ipv6_api_and_ssh_address():
    """ipa-api-url with an IPv6 literal: lookup and heartbeat go to it, and the heartbeat
    names the ramdisk's IPv6 address in brackets (what the conductor's SSH reaches)."""
    session = Session([Resp(200, {"node": {"uuid": NODE}, "config": {"agent_token": "t"}}),
                       Resp(202)])
    agent = agent_mod.Agent("http://[fd00::1]:6385", ["52:54:00:aa:bb:01"],
                            host_key="ssh-ed25519 AAAA", address="fd00::50",
                            session=session, binding_dir=agent_mod.DEFAULT_BINDING_DIR)
    _run(agent, session)
    assert [u for _, u, _ in session.sent] == [
        "http://[fd00::1]:6385/v1/lookup", f"http://[fd00::1]:6385/v1/heartbeat/{NODE}"]
    assert session.sent[1][2]["json"]["callback_url"] == "https://[fd00::50]:22"


def test_no_heartbeat_names_a_link_local_address(monkeypatch):
    """The IPv6-only lab (2026-11-29): the route to Ironic left from fe80:: while the DHCPv6
    lease was in duplicate address detection; the heartbeat named it and the conductor failed
    the deploy. The heartbeat now waits for a global source address."""
    sources = iter(["fe80::5054:ff:fe5b:5b00", "fd00:5a:c8::115"])
    monkeypatch.setattr(agent_mod, "source_address", lambda _url: next(sources))
    session = Session([Resp(200, {"node": {"uuid": NODE}, "config": {"agent_token": "t"}}),
                       Resp(202)])
    agent = agent_mod.Agent("http://[fd00:5a:c8::1]:6385", ["52:54:00:aa:bb:01"],
                            host_key="ssh-ed25519 AAAA", session=session,
                            binding_dir=agent_mod.DEFAULT_BINDING_DIR)
    _run(agent, session)
    heartbeats = [kw["json"]["callback_url"] for _, url, kw in session.sent if "heartbeat" in url]
    assert heartbeats == ["https://[fd00:5a:c8::115]:22"]
