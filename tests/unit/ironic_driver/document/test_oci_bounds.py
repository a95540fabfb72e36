"""What the conductor reads from an OCI registry is bounded (ironic_driver/document/oci.py,
bounded_session.py): Ironic's own OCI code against a local registry that answers too much,
forever, a byte at a time, in circles, or as a gzip bomb. Each ends in InvalidParameterValue
naming the bound, within its time."""

import http.server
import json
import time
import types

import pytest
from ironic.common import exception
from ironic.conf import CONF

from ironic_driver import config
from ironic_driver.document import oci
from tests import bombserver
from tests.unit.ironic_driver import registry_transport


class Hostile(bombserver._Handler):      # its _send, and its quiet log
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.server.paths.append(self.path)
        if self.path == "/v2/":
            return self._send(200, b"{}")
        how = self.server.how
        if how == "huge":
            return self._send(200, b'{"tags": ["' + b"v" * (5 << 20) + b'"]}')
        if how == "bomb":       # 2 MiB on the wire, 2 GiB inflated
            return self._send(200, bombserver.gzip_zeros(), "gzip")
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

# "plain": plain HTTP where this Ironic falls back to it (35 and later), else TLS; "tls": TLS
# on every release (most registries): the deadline must cut a TLS socket as well.
@pytest.fixture(params=["plain", "tls"])
def registry(request):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    srv.daemon_threads = True
    srv.paths = []
    # plain HTTP where this Ironic falls back to it (as realregistry's), else TLS
    config.register(CONF)        # oci_secret reads [provision_agent], run alone or not
    with registry_transport.serving(srv, tls=request.param == "tls"):
        yield srv
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


@pytest.mark.parametrize("how,inflated", [("huge", ""), ("bomb", " once inflated")])
def test_an_answer_past_its_size_is_refused(registry, how, inflated):
    message, _ = _identify(registry, how)
    assert f"the registry's answer was refused: the answer is larger than {oci.MAX_ANSWER} " \
           f"bytes{inflated}" in message


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
