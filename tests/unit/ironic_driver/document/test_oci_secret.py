"""The operator's pull secret goes only to the registries and token realms the operator lists
([provision_agent]oci_secret_registries; ironic_driver/document/oci_secret.py), against Ironic's
own OCI client and two local HTTP servers: a tenant's registry that answers 401 naming a token
realm, and that realm. Each records the Authorization headers it was sent."""

import base64
import http.server
import json
import types

import pytest
from ironic.common import exception
from ironic.conf import CONF

from ironic_driver import config
from ironic_driver.document import oci, oci_secret
from tests.unit.ironic_driver import registry_transport

OPERATOR = ("op-user", "op-S3cret-9f2")
OPERATOR_BASIC = "Basic " + base64.b64encode(":".join(OPERATOR).encode()).decode()
TENANT = ("tenant-user", "tenant-pw-77")
TENANT_BASIC = "Basic " + base64.b64encode(":".join(TENANT).encode()).decode()
MADE_WITH_OPERATOR = "token-made-with-the-operators-secret"
DIGEST = "sha256:" + "ab" * 32
MANIFEST = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2,
                       "digest": "sha256:" + "44" * 32},
            "layers": [{"mediaType": "application/octet-stream", "digest": DIGEST,
                        "size": 4096}],
            "annotations": {"disktype": "raw"}}


class Recorder(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, code, body=b"", **headers):
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        srv = self.server
        auth = self.headers.get("Authorization")
        srv.seen.append((self.path, auth))
        if srv.role == "realm":
            # A token service: what it hands out says whether credentials came with the ask.
            token = {OPERATOR_BASIC: MADE_WITH_OPERATOR, TENANT_BASIC: "tenants-token"}.get(
                auth, "anonymous")
            return self._send(200, json.dumps({"token": token}).encode(),
                              Content_Type="application/json")
        challenge = srv.challenge
        if self.path == "/v2/" or auth not in srv.accepts:
            return self._send(401, b"{}", WWW_Authenticate=challenge)
        if self.path.endswith("/tags/list"):
            return self._send(200, json.dumps({"tags": ["v1"]}).encode())
        if "/manifests/" in self.path:
            return self._send(200, json.dumps(MANIFEST).encode())
        return self._send(404, b"{}")


def _server(role):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    srv.daemon_threads = True
    # a private registry: what its realm hands out for credentials, or a basic sign-in
    srv.role, srv.seen = role, []
    srv.accepts = {f"Bearer {MADE_WITH_OPERATOR}", "Bearer tenants-token", OPERATOR_BASIC,
                   TENANT_BASIC}
    return srv


@pytest.fixture
def servers():
    config.register(CONF)
    realm, registry = _server("realm"), _server("registry")
    # plain HTTP where this Ironic falls back to it, else TLS (registry_transport.py)
    with registry_transport.serving(realm, registry) as scheme:
        registry.scheme = scheme
        registry.challenge = (f'Bearer realm="{scheme}://127.0.0.1:{realm.server_address[1]}'
                              f'/token",service="registry"')
        yield registry, realm
    CONF.clear_override("oci_secret_registries", "provision_agent")
    for srv in (registry, realm):
        srv.shutdown()
        srv.server_close()


def _node(registry, driver_info=None, instance_info=None):
    return types.SimpleNamespace(
        uuid="5d1e3c9a-6f0b-4f43-9a55-0e4f1c2b7d10", properties={},
        driver_info=dict(driver_info or {}),
        instance_info={"image_source": f"oci://127.0.0.1:{registry.server_address[1]}"
                                       "/im/disk:v1", **(instance_info or {})})


def _operators(node):
    node.driver_info["image_pull_secret"] = ":".join(OPERATOR)
    return node


def _headers(*servers):
    return [auth for srv in servers for _, auth in srv.seen if auth]


def test_a_tenants_realm_never_gets_the_operators_secret(servers):
    registry, realm = servers
    with pytest.raises(exception.InvalidParameterValue) as exc:
        oci.identify(_operators(_node(registry)))
    assert registry.seen, "the registry was never asked: the test proves nothing"
    assert _headers(realm, registry) == []
    message = str(exc.value)
    assert "[provision_agent]oci_secret_registries" in message
    assert "instance_info/image_pull_secret" in message
    assert OPERATOR[1] not in message


def test_a_tenants_basic_registry_never_gets_the_operators_secret(servers):
    registry, realm = servers
    registry.challenge = 'Basic realm="registry"'
    with pytest.raises(exception.InvalidParameterValue) as exc:
        oci.identify(_operators(_node(registry)))
    assert _headers(realm, registry) == []
    assert "oci_secret_registries" in str(exc.value)


def test_a_token_from_the_operators_realm_never_reaches_a_tenants_registry(servers):
    """The tenant's registry names the operator's own (listed) token service as its realm and
    serves its manifests to anyone: the realm must not mint a token with the operator's
    secret, and no such token goes to the registry or into instance_info for the ramdisk."""
    registry, realm = servers
    registry.accepts.update({None, "Bearer anonymous"})
    CONF.set_override("oci_secret_registries", [f"127.0.0.1:{realm.server_address[1]}"],
                      "provision_agent")
    found = oci.identify(_operators(_node(registry)))
    assert found["image_url"].startswith(
        f"{registry.scheme}://127.0.0.1:{registry.server_address[1]}/")
    assert OPERATOR_BASIC not in _headers(realm)
    assert not any(MADE_WITH_OPERATOR in h for h in _headers(registry))
    assert MADE_WITH_OPERATOR not in str(found.get("image_request_authorization_secret"))


def test_a_listed_registry_gets_the_secret_but_not_its_unlisted_realm(servers):
    registry, realm = servers
    CONF.set_override("oci_secret_registries", [f"127.0.0.1:{registry.server_address[1]}"],
                      "provision_agent")
    with pytest.raises(exception.InvalidParameterValue) as exc:
        oci.identify(_operators(_node(registry)))
    assert _headers(realm) == []
    assert f"was not sent to 127.0.0.1:{realm.server_address[1]}" in str(exc.value)


def test_a_listed_registry_and_realm_sign_in_with_the_operators_secret(servers):
    registry, realm = servers
    CONF.set_override("oci_secret_registries", [f"127.0.0.1:{p}" for p in (
        registry.server_address[1], realm.server_address[1])], "provision_agent")
    found = oci.identify(_operators(_node(registry)))
    assert OPERATOR_BASIC in _headers(realm)
    assert f"Bearer {MADE_WITH_OPERATOR}" in _headers(registry)
    assert found["image_request_authorization_secret"] == f"Bearer {MADE_WITH_OPERATOR}"


def test_the_tenants_own_secret_goes_where_the_tenant_points(servers):
    registry, realm = servers
    node = _operators(_node(registry, instance_info={"image_pull_secret": ":".join(TENANT)}))
    found = oci.identify(node)
    assert TENANT_BASIC in _headers(realm)
    assert found["image_request_authorization_secret"] == "Bearer tenants-token"
    assert OPERATOR_BASIC not in _headers(realm, registry)


def test_a_public_registry_resolves_without_credentials(servers):
    registry, realm = servers
    registry.accepts.add(None)
    found = oci.identify(_operators(_node(registry)))
    assert found["image_url"].startswith(
        f"{registry.scheme}://127.0.0.1:{registry.server_address[1]}/")
    assert not found.get("image_request_authorization_secret")
    assert _headers(realm, registry) == []


@pytest.mark.parametrize("url,entries,ok", [
    ("oci://registry.example/x:1", ["registry.example"], True),
    ("https://registry.example:5000/v2/", ["registry.example"], True),
    ("https://registry.example:5000/v2/", ["registry.example:5001"], False),
    ("https://auth.docker.io/token", [".docker.io"], True),
    ("https://docker.io.evil.example/token", [".docker.io"], False),
    ("https://evilregistry.example/", ["registry.example"], False),
    ("https://REGISTRY.example/", ["registry.EXAMPLE"], True),
    ("https://x/", [], False),
])
def test_listed_hosts(url, entries, ok):
    assert oci_secret.listed(url, entries) is ok
