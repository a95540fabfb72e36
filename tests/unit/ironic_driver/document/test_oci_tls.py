"""The CA Ironic's OCI client verifies a registry with is the one Ironic was configured with
(bounded_session.py keeps its TLS verification). Ironic 35 and later set the session's
`verify` to [oci]verify_ca; requests prefers REQUESTS_CA_BUNDLE (or CURL_CA_BUNDLE) from the
environment to a session's `verify` whenever a request passes none, as Ironic's client does,
so a conductor whose environment names the system's bundle (container images often do)
refused a private registry its operator had given the CA of."""

import http.server
import ssl
import threading

import pytest
import requests

from ironic_driver.document import bounded_session
from tests import testca


class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def registry(tmp_path):
    """(URL, the registry's CA bundle, another CA's bundle) of a TLS server on 127.0.0.1."""
    ca, other = testca.CA(str(tmp_path / "ca")), testca.CA(str(tmp_path / "other"), "another CA")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    srv.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*ca.server("registry"))
    srv.socket = context.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{srv.server_address[1]}/v2/", ca.bundle, other.bundle
    srv.shutdown()
    srv.server_close()


def _bounded(verify):
    like = requests.Session()
    like.verify = verify             # what Ironic's OciClient does with [oci]verify_ca
    return bounded_session.BoundedSession(like, 10, 1 << 20, 5)


@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_the_configured_ca_wins_over_the_environments_bundle(registry, monkeypatch, variable):
    url, ca, other = registry
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.setenv(variable, other)
    session = _bounded(ca)
    try:
        assert session.get(url).json() == {}
    finally:
        session.close()


def test_a_session_without_a_ca_of_its_own_still_takes_the_environments(registry,
                                                                       monkeypatch):
    """Before 35, Ironic's client verifies with `True`: the conductor's bundle, which is how
    an operator of 29.x or 32.x gives it a registry's CA (docs/ironic.md, section 6)."""
    url, ca, other = registry
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", ca)
    session = _bounded(True)
    try:
        assert session.get(url).json() == {}
    finally:
        session.close()
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", other)
    session = _bounded(True)
    try:
        with pytest.raises(requests.exceptions.SSLError):
            session.get(url)
    finally:
        session.close()
