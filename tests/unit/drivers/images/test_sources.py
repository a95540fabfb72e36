"""Image sources against a local HTTP server we control: Range resume, drops, errors, timeouts.

The server (also used by test_image_writer.py) runs on 127.0.0.1 in a thread. Each file it
serves can be told to drop the connection after N bytes (once or always), to refuse Range, to
answer with a status (and a Location), to stall, to drip, or to want an Authorization
header.
"""

import http.server
import os
import threading
import time

import pytest

from provision_agent.drivers.images import sources
from provision_agent.errors import ImageError


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        srv.requests.append((self.path, dict(self.headers)))
        name = self.path.lstrip("/").split("?")[0]
        rule = srv.rules.get(name, {})
        if rule.get("auth") and self.headers.get("Authorization") != rule["auth"]:
            rule = {"status": 401}
        if rule.get("status"):
            self.send_response(rule["status"])
            if rule.get("location"):
                self.send_header("Location", rule["location"])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if name not in srv.files:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = srv.files[name]
        start = 0
        rng = self.headers.get("Range")
        if rng and rule.get("ranges", True):
            start = int(rng.split("=")[1].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        if rule.get("ranges", True):
            self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        body = data[start:]
        if rule.get("stall"):
            time.sleep(rule["stall"])
        if rule.get("drip"):            # a byte, then a pause, for as long as it is heard
            try:
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(rule["drip"])
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        drop = rule.get("drop_after")
        if drop is not None and rule.get("drops", 1) > 0:
            rule["drops"] = rule.get("drops", 1) - 1
            self.wfile.write(body[:drop])
            self.wfile.flush()
            self.close_connection = True
            return
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


@pytest.fixture
def http_server():
    srv = Server(("127.0.0.1", 0), Handler)
    srv.files, srv.rules, srv.requests = {}, {}, []
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}/"
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def read_all(src, n=65536):
    parts = []
    while True:
        data = src.read(n)
        if not data:
            return b"".join(parts)
        parts.append(data)


def readinto_all(src, n=1 << 20):
    """What the raw image path does: readinto() a reused buffer, never read()."""
    buf, parts = memoryview(bytearray(n)), []
    while k := src.readinto(buf):
        parts.append(bytes(buf[:k]))
    return b"".join(parts)


READERS = pytest.mark.parametrize("read", [read_all, readinto_all], ids=["read", "readinto"])


DATA = os.urandom(3 << 20)


@READERS
def test_file_source_path_and_file_uri(tmp_path, read):
    path = tmp_path / "img"
    path.write_bytes(DATA)
    for uri in (str(path), f"file://{path}"):
        src = sources.open_source(uri)
        assert src.size == len(DATA)
        assert read(src) == DATA


def test_missing_file_is_image_error(tmp_path):
    with pytest.raises(ImageError, match="cannot open"):
        sources.open_source(str(tmp_path / "nope"))


@READERS
def test_http_stream_sends_headers(http_server, read):
    http_server.files["a"] = DATA
    src = sources.open_source(http_server.url + "a", headers={"Authorization": "Bearer t"})
    assert src.size == len(DATA)
    assert read(src) == DATA
    assert http_server.requests[0][1].get("Authorization") == "Bearer t"


@READERS
def test_drop_mid_stream_resumes_with_range(http_server, read):
    http_server.files["a"] = DATA
    http_server.rules["a"] = {"drop_after": 1_000_000, "drops": 2}
    src = sources.open_source(http_server.url + "a")
    assert read(src) == DATA
    ranges = [h.get("Range") for _, h in http_server.requests]
    assert ranges[0] is None and ranges[1] == "bytes=1000000-"
    assert len(ranges) == 3


@READERS
def test_drop_without_range_support_fails_clearly(http_server, read):
    http_server.files["a"] = DATA
    http_server.rules["a"] = {"drop_after": 1_000_000, "ranges": False}
    src = sources.open_source(http_server.url + "a")
    with pytest.raises(ImageError, match="does not support Range") as exc:
        read(src)
    assert http_server.url + "a" in str(exc.value)


@READERS
def test_drops_forever_give_up_after_retries(http_server, read):
    http_server.files["a"] = DATA
    http_server.rules["a"] = {"drop_after": 0, "drops": 100}
    with pytest.raises(ImageError):
        src = sources.open_source(http_server.url + "a", retries=3)
        read(src)


def test_readinto_after_a_peek_reads_on_where_the_peek_stopped(http_server):
    # the compression check read()s the first bytes, then the raw path readinto()s the rest
    http_server.files["a"] = DATA
    src = sources.open_source(http_server.url + "a")
    assert src.read(8) == DATA[:8]
    assert readinto_all(src) == DATA[8:]


def test_readinto_takes_the_body_from_http_client_not_a_copied_bytes(http_server):
    http_server.files["a"] = DATA
    src = sources.open_source(http_server.url + "a")
    into = sources._body_readinto(src._resp)
    assert into.__self__ is src._resp.raw._fp      # http.client's own, under urllib3
    src.close()


@pytest.mark.parametrize("status", [404, 403, 500, 503])
def test_http_error_status(http_server, status):
    http_server.rules["a"] = {"status": status}
    with pytest.raises(ImageError, match=f"HTTP {status}") as exc:
        sources.open_source(http_server.url + "a", retries=2)
    assert "127.0.0.1" in str(exc.value)


def test_read_timeout(http_server):
    http_server.files["a"] = DATA
    http_server.rules["a"] = {"stall": 3, "ranges": False}
    start = time.monotonic()
    with pytest.raises(ImageError):
        src = sources.open_source(http_server.url + "a", timeout=(2, 0.5), retries=2)
        read_all(src)
    assert time.monotonic() - start < 10


def test_connection_refused():
    with pytest.raises(ImageError, match="cannot connect"):
        sources.open_source("http://127.0.0.1:9/x", retries=2)


def test_unknown_scheme():
    with pytest.raises(ImageError, match="not supported"):
        sources.open_source("gopher://127.0.0.1/x")
