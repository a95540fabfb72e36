"""How the unit tests' stand-in OCI registries reach the installed Ironic's OCI client.

Ironic 35 (2026.1) and later fall back to plain HTTP when [oci]permit_fallback_to_http_transport
is set; before it (29.x, 32.x) Ironic's client only builds https:// URLs, checked against
the system's CA bundle (their [DEFAULT]webserver_verify_ca must be a boolean there; requests
reads REQUESTS_CA_BUNDLE); ironic_driver/ironic_compat.py, oci_speaks_plain_http. So the same
tests run against both: plain HTTP where Ironic has the option, else TLS with a certificate
for 127.0.0.1 made here and trusted through REQUESTS_CA_BUNDLE."""

import contextlib
import datetime
import ipaddress
import os
import ssl
import tempfile
import threading
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from ironic.conf import CONF

from ironic_driver import ironic_compat


def _self_signed(folder):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = Path(folder) / "registry.pem", Path(folder) / "registry.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


def _restore(name, value):
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@contextlib.contextmanager
def serving(*servers, tls=False):
    """Starts each http.server in a thread as this Ironic can reach it (with TLS when `tls`,
    which every release reaches); yields the URL scheme ("http" or "https") the servers' own
    links should use."""
    with contextlib.ExitStack() as stack:
        if ironic_compat.oci_speaks_plain_http() and not tls:
            CONF.set_override("permit_fallback_to_http_transport", True, "oci")
            stack.callback(CONF.clear_override, "permit_fallback_to_http_transport", "oci")
            scheme = "http"
        else:
            cert, key = _self_signed(stack.enter_context(tempfile.TemporaryDirectory()))
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            for srv in servers:
                srv.socket = context.wrap_socket(srv.socket, server_side=True)
            previous = os.environ.get("REQUESTS_CA_BUNDLE")
            os.environ["REQUESTS_CA_BUNDLE"] = cert
            stack.callback(_restore, "REQUESTS_CA_BUNDLE", previous)
            scheme = "https"
        for srv in servers:
            threading.Thread(target=srv.serve_forever, daemon=True).start()
        yield scheme
