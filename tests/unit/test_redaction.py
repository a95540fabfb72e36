"""No credential, signed URL or configdrive content in what provision shows: the
text plan, the JSON plan, the events file, validation errors, image errors and the log."""

import json

from provision_agent import redact
from provision_agent.drivers.images import sources
from provision_agent.errors import ImageError
from tests.unit.helpers import CONFIGDRIVE, mutate, run_cli, sample

SIG = "SIGNATURE0123456789abcdef"
PASSWORD = "Hunter2-SECRET"
TEMP_URL = (f"https://user:{PASSWORD}@swift.example:8080/v1/AUTH_x/images/root.img"
            f"?temp_url_sig={SIG}&temp_url_expires=1999999999")
SECRETS = (SIG, PASSWORD, CONFIGDRIVE, "user:")


def with_secrets(d):
    d["images"] = [{"uri": TEMP_URL, "target": "lv-root",
                    "checksum": "sha256:" + "0" * 64}]
    d["configdrive"] = {"content": CONFIGDRIVE, "user_data": f"#cloud-config\npassword: {PASSWORD}",
                        "meta_data": {"admin_pass": PASSWORD, "hostname": "node-1"}}


def assert_clean(text):
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} shown"


def test_plans_and_logs_show_no_secret(tmp_path):
    doc = mutate(sample("two-disk-raid-lvm"), with_secrets)
    rc, text_plan, err = run_cli(tmp_path, doc, extra=["--debug"])
    assert rc == 0, err
    assert "https://swift.example:8080/v1/AUTH_x/images/root.img?…" in text_plan
    rc, json_plan, err2 = run_cli(tmp_path, doc, extra=["--plan_format", "json"])
    assert rc == 0
    plan = json.loads(json_plan)
    step = next(s for s in plan["steps"] if s["kind"] == "configdrive")
    assert step["args"]["content"] == redact.MARK and step["args"]["user_data"] == redact.MARK
    assert step["args"]["meta_data"] == {"admin_pass": redact.MARK, "hostname": "node-1"}
    for shown in (text_plan, err, json_plan, err2):
        assert_clean(shown)


def test_schema_errors_do_not_echo_values(tmp_path):
    doc = mutate(sample("single-disk"), lambda d: d.__setitem__(
        "configdrive", {"user_data": {"plain_text_passwd": PASSWORD}}))
    rc, _, err = run_cli(tmp_path, doc, "single-disk")
    assert rc == 2 and "$.configdrive.user_data: must be a string, not an object" in err
    assert_clean(err)


def test_events_are_redacted(tmp_path):
    from provision_agent.run.events import Events
    path = tmp_path / "events"
    with open(path, "w") as f:
        ev = Events([f])
        ev.step(1, 2, "write_image", "start", description=f"raw image {TEMP_URL} to /dev/vda3")
        ev.result("failed", 5, f"image {TEMP_URL}: HTTP 403 Forbidden")
    assert_clean(path.read_text())
    shown = [json.loads(line) for line in path.read_text().splitlines()]
    assert shown[0]["description"] == \
        "raw image https://swift.example:8080/v1/AUTH_x/images/root.img?… to /dev/vda3"
    assert shown[1]["message"] == \
        "image https://swift.example:8080/v1/AUTH_x/images/root.img?…: HTTP 403 Forbidden"


def test_image_errors_reach_the_operator_redacted(tmp_path, capsys):
    from provision_agent.cli import main as cli
    try:
        sources.open_source(f"http://user:{PASSWORD}@127.0.0.1:9/x.img?sig={SIG}",
                            retries=1, timeout=1)
    except ImageError as exc:
        message = redact.text(str(exc))
    assert_clean(message)
    assert "http://127.0.0.1:9/x.img?…" in message
    assert cli is not None


def test_url_and_text():
    assert redact.url(TEMP_URL) == "https://swift.example:8080/v1/AUTH_x/images/root.img?…"
    assert redact.url("http://[::1]:80/a") == "http://[::1]:80/a"
    assert redact.text(f"x {TEMP_URL} y") == \
        "x https://swift.example:8080/v1/AUTH_x/images/root.img?… y"


def test_redaction_is_linear(watchdog):
    for text in ("/" * 200_000 + "?", "a" * 200_000 + "://" + "b" * 200_000, "x://" * 50_000,
                 "/a?b " * 50_000, "?" * 200_000):
        redact.text(text)


def test_a_url_ending_in_an_ipv6_literal_keeps_its_host():
    """The closing bracket of an IPv6 literal at a URL's end was cut off as punctuation, and
    the URL that no longer parsed was shown as the marker alone (issue 62)."""
    assert redact.text("cannot reach http://[fd00::1]: refused") == \
        "cannot reach http://[fd00::1]: refused"
    assert redact.text("at https://user:pw@[fd00::1].") == "at https://[fd00::1]."
    assert redact.text("(see http://h/x)]") == "(see http://h/x)]"


def test_urllib3s_unbracketed_ipv6_host_and_port_stay_whole():
    """urllib3 logs 'http://fd00:6::1:43555 "GET /x"': the line read 'http://fd00 "GET /x"'
    in the ramdisk's IPv6 run (issue 62); user info still goes."""
    assert redact.text('http://fd00:6:1a87::1:43555 "GET /SHA256SUMS HTTP/1.1" 200 81') == \
        'http://fd00:6:1a87::1:43555 "GET /SHA256SUMS HTTP/1.1" 200 81'
    assert redact.text("http://u:pw@fd00::1:80/x?sig=1") == "http://fd00::1:80/x?…"
