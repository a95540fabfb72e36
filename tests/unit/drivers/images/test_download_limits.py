"""Downloads end: a dripping server is cut by the stall deadline, a redirect loop is
an image error naming the URL (without its query), a configdrive cannot inflate past its
partition, and a configdrive URL is fetched with the image download's TLS options."""

import base64
import gzip
import http.server
import threading
import time

import pytest

from provision_agent.drivers import configdrive
from provision_agent.drivers.images import sources
from provision_agent.errors import ImageError
from provision_agent.plan import configdrive_format


class Drip(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.startswith("/loop"):
            self.send_response(302)
            self.send_header("Location", self.path)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", "1000000")
        self.end_headers()
        try:
            for _ in range(100):            # the test stops long before: 1 byte every 0.1 s
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass


@pytest.fixture
def drip():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    srv.daemon_threads = True
    srv.block_on_close = False      # the dripping handler would hold server_close() 10 s
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_a_dripping_server_is_cut_by_the_stall_deadline(drip):
    src = sources.open_source(drip + "/image.img?sig=SECRET", stall_bytes=1000,
                              stall_seconds=1, retries=1)
    with pytest.raises(ImageError) as exc:
        while src.read(1 << 20):
            pass
    msg = str(exc.value)
    assert "stalled: fewer than 1000 bytes in 1 s" in msg
    assert "/image.img?…" in msg and "SECRET" not in msg


def test_a_redirect_loop_is_an_image_error_naming_the_url(drip):
    with pytest.raises(ImageError) as exc:
        sources.open_source(drip + "/loop?sig=SECRET", retries=1)
    assert "TooManyRedirects" in str(exc.value) and "/loop?…" in str(exc.value)
    assert "SECRET" not in str(exc.value)


def test_a_configdrive_cannot_inflate_past_its_partition():
    bomb = base64.b64encode(gzip.compress(bytes(configdrive_format.MAX_BYTES + 4096))).decode()
    assert len(bomb) < 1 << 20        # the case: a small string, a huge drive
    with pytest.raises(ImageError, match="inflates to more than"):
        configdrive_format.decode_ironic(bomb)


def test_a_configdrive_url_uses_the_image_tls_options(monkeypatch):
    seen = {}

    class Resp:
        headers = {}

        def __init__(self):
            body = [b"QUJD", b""]
            self.raw = type("Raw", (), {"read": staticmethod(lambda n, decode_content:
                                                            body.pop(0))})()

        def raise_for_status(self):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    def get(url, **kw):
        seen.update(kw)
        return Resp()

    import requests
    monkeypatch.setattr(requests, "get", get)
    assert configdrive.fetch("https://h/cd", options={"image_ca_bundle": "/ca.pem"}) == "QUJD"
    assert seen["verify"] == "/ca.pem"
    configdrive.fetch("https://h/cd", options={"image_insecure": True})
    assert seen["verify"] is False


@pytest.mark.parametrize("fetch", ["input document", "configdrive"])
def test_a_dripping_document_or_configdrive_is_cut_at_its_deadline(drip, monkeypatch, fetch):
    """A byte every 0.1 s keeps each receive within its timeout: only the read's own deadline,
    which shuts the socket down, ends it (bounded_http.read)."""
    from provision_agent.cli import input_source
    from provision_agent.errors import InputUnreachable
    monkeypatch.setattr(input_source, "DEADLINE", 1)
    monkeypatch.setattr(configdrive, "FETCH_SECONDS", 1)
    start = time.monotonic()
    if fetch == "input document":
        with pytest.raises(InputUnreachable, match="took longer than 1 s"):
            input_source.fetch(drip + "/input.json", attempts=1)
    else:
        with pytest.raises(ImageError, match="took longer than 1 s"):
            configdrive.fetch(drip + "/configdrive")
    assert time.monotonic() - start < 5
