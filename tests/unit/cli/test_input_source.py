"""--input_data_url: transient failures retried, what still fails exits 6 naming the URL (without
its query string or credentials), bad bytes and shapes are invalid input (2) with a place."""

import http.server
import json
import socket
import threading

import pytest
import tenacity

from provision_agent import errors
from provision_agent.cli import input_source
from provision_agent.plan import json_text
from tests.unit.helpers import SAMPLES

DOC = (SAMPLES / "single-disk.json").read_bytes()


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        srv.requests += 1
        status = srv.statuses.pop(0) if srv.statuses else 200
        body = DOC if status == 200 else b"no"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.requests, srv.statuses = 0, []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def url(srv, path="/layout.json?temp_url_sig=SECRET"):
    return f"http://user:PASSWORD@127.0.0.1:{srv.server_address[1]}{path}"


NO_WAIT = tenacity.wait_none()


def test_transient_5xx_is_retried_then_fetched(server):
    server.statuses = [503, 502]
    text = input_source.fetch(url(server), wait=NO_WAIT)
    assert json.loads(text)["version"] == 1 and server.requests == 3


def test_http_error_is_not_retried_and_exits_6_without_secrets(server):
    server.statuses = [404]
    with pytest.raises(errors.InputUnreachable) as exc:
        input_source.fetch(url(server), wait=NO_WAIT)
    assert exc.value.exit_code == 6 and server.requests == 1
    msg = str(exc.value)
    assert "HTTP 404" in msg and f"127.0.0.1:{server.server_address[1]}/layout.json" in msg
    assert "SECRET" not in msg and "PASSWORD" not in msg and "user" not in msg


def test_refused_connection_retries_then_exits_6_in_plain_words():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]       # nothing listens once closed
    with pytest.raises(errors.InputUnreachable) as exc:
        input_source.fetch(f"http://127.0.0.1:{port}/x.json", attempts=3, wait=NO_WAIT)
    msg = str(exc.value)
    assert "connection refused (gave up after 3 attempts)" in msg
    assert "HTTPConnectionPool" not in msg and "urllib3" not in msg


def test_cli_exit_code_6_is_documented(server, capsys):
    from provision_agent.cli import main as cli
    server.statuses = [403]
    rc = cli.main(["--input_data_url", url(server), "--dry_run"])
    err = capsys.readouterr().err
    assert rc == 6 and "cannot fetch the input document" in err and "SECRET" not in err


@pytest.mark.parametrize("raw,where,what", [
    (b'{"version": "\xff"}', "byte 13", "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "in.json", "nested deeper than 64 levels"),
    (b'{"a":' * 70 + b"1" + b"}" * 70, "in.json", "nested deeper than 64 levels"),
    (b'{"size": 1e309}', "in.json", "too large"),
    (b'{"size": NaN}', "in.json", "NaN is not a JSON number"),
    (b'{"size": -Infinity}', "in.json", "-Infinity is not a JSON number"),
])
def test_bytes_that_are_no_document_are_invalid_input_with_a_place(raw, where, what):
    with pytest.raises(errors.InputError) as exc:
        json_text.parse_document(raw, "in.json")
    assert where in str(exc.value) and what in str(exc.value)


def test_an_ipv6_input_url_is_fetched():
    """--input_data_url=http://[::1]:PORT/... (issue 62)."""
    class Server6(http.server.ThreadingHTTPServer):
        address_family = socket.AF_INET6
    srv = Server6(("::1", 0), Handler)
    srv.requests, srv.statuses = 0, []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        text = input_source.read_input(url=f"http://[::1]:{srv.server_address[1]}/x.json")
    finally:
        srv.shutdown()
        srv.server_close()
    assert text["version"] == 1 and srv.requests == 1


def test_a_malformed_ipv6_input_url_is_invalid_input_with_its_place(capsys):
    from provision_agent.cli import main as cli
    rc = cli.main(["--input_data_url", "http://[fd00::1:8080/x.json?sig=SECRET", "--dry_run"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "--input_data_url: the IPv6 literal '[fd00::1:8080' has no closing ']'" in err
    assert "SECRET" not in err
