"""What the conductor reads from an OCI registry is bounded (ironic_driver/oci.py,
bounded_session.py): Ironic's own OCI code against a local registry that answers too much,
forever, a byte at a time, or in circles. Each ends in InvalidParameterValue naming the
bound, within its time."""

import http.server
import json
import threading
import time
import types

import pytest
from ironic.common import exception
from ironic.conf import CONF

from ironic_driver import oci


class Hostile(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.paths.append(self.path)
        if self.path == "/v2/":
            return self._send(200, b"{}")
        how = self.server.how
        if how == "huge":
            return self._send(200, b'{"tags": ["' + b"v" * (5 << 20) + b'"]}')
        if how == "pages":      # a tag list whose next page is always another
            return self._send(200, json.dumps({"tags": ["v0"]}).encode(),
                              Link=f'<{self.path}&n={len(self.server.paths)}>; rel="next"')
        if how == "redirects":
            return self._send(302, b"", Location=self.path + "x")
        if how in ("drip", "drip-headers"):
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            if how == "drip":
                self.wfile.write(b"Content-Length: 1000\r\n\r\n")
            for _ in range(1000):       # the body, or a header line, a byte at a time
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.05)

    def _send(self, status, body, **headers):
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def registry():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    srv.daemon_threads = True
    srv.paths = []
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    # plain HTTP, as realregistry's: Ironic tries HTTPS first
    CONF.set_override("permit_fallback_to_http_transport", True, "oci")
    yield srv
    CONF.clear_override("permit_fallback_to_http_transport", "oci")
    srv.shutdown()
    srv.server_close()


def _identify(srv, how):
    srv.how = how
    node = types.SimpleNamespace(
        uuid="1be26c0b-03f2-4d2e-ae87-c02d7fa0b2e5", driver_info={}, properties={},
        instance_info={"image_source": f"oci://127.0.0.1:{srv.server_address[1]}/im/disk:v1"})
    start = time.monotonic()
    with pytest.raises(exception.InvalidParameterValue) as exc:
        oci.identify(node)
    return str(exc.value), time.monotonic() - start


def test_an_answer_past_its_size_is_refused(registry):
    message, _ = _identify(registry, "huge")
    assert f"the registry's answer was refused: the answer is larger than {oci.MAX_ANSWER} " \
           "bytes" in message


def test_endless_pages_end_at_the_deadline(registry, monkeypatch):
    monkeypatch.setattr(oci, "DEADLINE", 2)
    message, took = _identify(registry, "pages")
    assert "the registry did not answer within 2 s" in message
    assert took < 4 and len(registry.paths) > 3


@pytest.mark.parametrize("how", ["drip", "drip-headers"])
def test_a_dripping_answer_ends_at_the_deadline(registry, monkeypatch, how):
    monkeypatch.setattr(oci, "DEADLINE", 2)
    message, took = _identify(registry, how)
    assert "the registry did not answer within 2 s" in message
    assert took < 4


def test_redirects_in_circles_stop(registry):
    message, _ = _identify(registry, "redirects")
    assert f"more than {oci.MAX_REDIRECTS} redirects" in message
    assert len([p for p in registry.paths if p != "/v2/"]) == oci.MAX_REDIRECTS + 1
