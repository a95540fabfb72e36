"""A certificate authority made in the test, and server certificates it signs: what an
operator's private CA is to a registry or image server on the provisioning network. The CA
certificate is the bundle a client is given ([oci]verify_ca, REQUESTS_CA_BUNDLE,
--image_ca_bundle); a server certificate is never trusted on its own."""

import datetime
import ipaddress
import os

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(common):
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "provision tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _builder(subject, issuer, public_key):
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1)))


class CA:
    def __init__(self, folder, name="provision tests CA"):
        """Makes the CA's key and certificate under folder (ca.pem: the bundle to trust)."""
        os.makedirs(folder, exist_ok=True)
        self.folder = folder
        self._key = ec.generate_private_key(ec.SECP256R1())
        self._subject = _name(name)
        cert = (_builder(self._subject, self._subject, self._key.public_key())
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(
                    digital_signature=False, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True,
                    crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
                .sign(self._key, hashes.SHA256()))
        self.bundle = os.path.join(folder, "ca.pem")
        with open(self.bundle, "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))

    def server(self, name, hosts=("127.0.0.1", "localhost")):
        """(certificate file, key file) for a server answering to hosts (addresses or DNS
        names), signed by this CA."""
        key = ec.generate_private_key(ec.SECP256R1())
        names = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        cert = (_builder(_name(hosts[0]), self._subject, key.public_key())
                .add_extension(x509.SubjectAlternativeName(names), critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                               critical=False)
                .sign(self._key, hashes.SHA256()))
        cert_file = os.path.join(self.folder, f"{name}.pem")
        key_file = os.path.join(self.folder, f"{name}.key")
        with open(cert_file, "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
        with open(os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
            f.write(_pem_key(key))
        return cert_file, key_file
