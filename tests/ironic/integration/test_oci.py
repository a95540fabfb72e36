"""instance_info/image_source as an oci:// reference with a pull secret, against a real
registry (tests/ironic/realregistry.py: docker-registry with htpasswd and TLS from a CA made
here on 127.0.0.1, the artifact pushed by skopeo) and a real Ironic resolving it with its own
OCI code, given the CA the way its release takes it ([oci]verify_ca from 35, the conductor's
REQUESTS_CA_BUNDLE before). The
"ramdisk" is the local sshd running the real `provision --dry_run`; then provision's real
image step downloads the blob the document names from the registry onto a file."""

import hashlib
import json
import os

import pytest
import zstandard

from provision_agent.drivers.images import write_step
from provision_agent.plan import inventory as inv_mod
from provision_agent.plan import pipeline
from provision_agent.run.runner import Runner
from tests import REPO_ROOT
from tests.ironic import realenv, realregistry
from tests.ironic.conftest import require
from tests.unit.drivers.images.test_authorization import refused_download

ROOT = REPO_ROOT
INVENTORY = os.path.join(ROOT, "samples", "inventory", "single-disk.json")
# A whole-disk image: an MBR signature, then data; zstd-compressed as artifacts often are.
DISK = b"\x00" * 510 + b"\x55\xaa" + os.urandom(1 << 20) + bytes(3 << 20)
BLOB = zstandard.ZstdCompressor().compress(DISK)


@pytest.fixture(scope="module")
def env(ramdisk, tmp_path_factory):
    require(not realregistry.missing(), f"missing: {realregistry.missing()} "
                                        "(scripts/host-packages.sh installs them)")
    workdir = str(tmp_path_factory.mktemp("oci-ironic"))
    ca = realregistry.make_ca(workdir)
    registry = realregistry.Registry(workdir, ca).start()
    blob_digest, _ = registry.push("images/disk", "v1", BLOB)
    # The operator's credentials (driver_info/image_pull_secret) are for this registry when
    # named 127.0.0.1:PORT, and the same registry named localhost:PORT is another host.
    opts = dict(realenv.dry_run_options(ramdisk, workdir, INVENTORY),
                oci_secret_registries=registry.host)
    ironic = realenv.Ironic(workdir, opts, extra_conf=realregistry.ironic_conf(ca))
    try:
        ironic.start(env=realregistry.ironic_env(ca))
        ironic.remote_dir = os.path.join(workdir, "remote")
        yield registry, ironic, blob_digest
    finally:
        ironic.stop()
        registry.stop()


def _enroll(ironic, ramdisk, name, source, secret, operators=None):
    info = {"image_source": source}
    if secret is not None:
        info["image_pull_secret"] = secret
    driver_info = {"provision_ssh_address": "127.0.0.1", "provision_ssh_port": ramdisk.port,
                   "provision_host_key": ramdisk.host_key}
    if operators is not None:
        driver_info["image_pull_secret"] = operators
    return ironic.enroll(name, driver_info, info)


def _secrets(registry):
    """Every form the credential could show in: the password, user:password, its base64."""
    return [registry.password, f"{registry.user}:{registry.password}",
            registry.basic().split()[1]]


def _shows_none(registry, text):
    return [s for s in _secrets(registry) if s in text]


@pytest.fixture(scope="module")
def deployed(env, ramdisk):
    """One node deployed from oci://...:v1 with its pull secret; what its ramdisk got."""
    registry, ironic, blob_digest = env
    uuid = _enroll(ironic, ramdisk, "oci-good", f"oci://{registry.host}/images/disk:v1",
                   f"{registry.user}:{registry.password}")
    ironic.set_state(uuid, "active")
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 120)
    with open(os.path.join(ironic.remote_dir, uuid, "input.json")) as f:
        sent = json.load(f)
    with open(os.path.join(ironic.remote_dir, uuid, "output.log")) as f:
        output = f.read()
    return uuid, node, sent, output


def test_an_oci_reference_deploys_with_the_blob_url_digest_and_authorization(env, deployed):
    registry, ironic, blob_digest = env
    uuid, node, sent, output = deployed
    assert node["provision_state"] == "active", node["last_error"]
    info = sent["instance_info"]
    blob_url = f"{registry.url}/v2/images/disk/blobs/{blob_digest}"
    assert info["image_url"] == blob_url
    assert info["image_checksum"] == blob_digest.split(":")[1] \
        == hashlib.sha256(BLOB).hexdigest()
    assert info["image_disk_format"] == "raw" and info["image_compression_type"] == "zstd"
    assert info["image_request_authorization_secret"] == registry.basic()
    assert "image_pull_secret" not in info          # the ramdisk gets the header only
    # provision planned that blob as a whole-disk image, checked against the digest.
    assert f"disk image {blob_url} to /dev/" in output, output
    assert _shows_none(registry, output) == []


def test_the_secret_shows_nowhere_in_the_api_or_the_conductors_log(env, deployed):
    registry, ironic, _ = env
    uuid, _, _, _ = deployed
    node = ironic.node(uuid)
    assert node["instance_info"]["image_pull_secret"] == "******"     # Ironic masks these
    assert node["instance_info"]["image_request_authorization_secret"] == "******"
    listed = ironic.get("/v1/nodes/detail")
    logs = ironic.log_text()
    with open(os.path.join(ironic.dir, "ironic.out")) as f:
        logs += f.read()
    # Ironic did sign in: the registry authorized its manifest requests (every release; 35
    # and later also log "Obtained OCI credential from node"); its log is the node's
    assert registry.authorized("/v2/images/disk/manifests/")
    assert uuid in logs
    for text in (json.dumps(node), json.dumps(listed), logs):
        assert _shows_none(registry, text) == []


def test_provision_downloads_the_blob_with_the_header_and_checks_the_digest(env, deployed,
                                                                          tmp_path):
    """What the ramdisk does with the document it got, on a file instead of a disk, given
    the registry's CA as an operator gives it (--image_ca_bundle)."""
    registry, _, _ = env
    _, _, sent, _ = deployed
    step = _image_step(sent)
    assert step.args["checksum"] == "sha256:" + hashlib.sha256(BLOB).hexdigest()
    target = tmp_path / "disk"
    result = write_step.write_image(dict(step.args, device=str(target)), runner=Runner(),
                                events=None, target_root=str(tmp_path),
                                options={"image_ca_bundle": registry.ca})
    assert result["compression"] == "zstd" and result["bytes_in"] == len(BLOB)
    assert target.read_bytes() == DISK


def test_a_wrong_secret_fails_the_download_with_exit_5_and_no_secret(env, deployed,
                                                                      tmp_path, caplog):
    registry, _, _ = env
    _, _, sent, _ = deployed
    doc = json.loads(json.dumps(sent))
    wrong = registry.basic()[:-4] + "AAA="
    doc["instance_info"]["image_request_authorization_secret"] = wrong
    shown = refused_download(_image_step(doc).args, tmp_path, caplog,
                             options={"image_ca_bundle": registry.ca})
    assert _shows_none(registry, shown) == [] and wrong.split()[1] not in shown


def _image_step(document):
    planned = pipeline.build_plan(pipeline.load_layout(document, "ironic"),
                                  inv_mod.load(INVENTORY))
    (step,) = [s for s in planned.steps if s.kind == "write_image"]
    return step


@pytest.mark.parametrize("source,secret,says", [
    ("images/disk:v2", "good", "no such tag (Image tag oci://{host}/images/disk:v2 could not "
                               "be found, available tags are v1)"),
    ("images/disk:v1", "puller:wrong-password", "the registry refused the pull secret"),
    ("images/disk:v1", None, "the registry wants credentials: set instance_info/"
                             "image_pull_secret"),
    ("images/none:v1", "good", "no such repository"),
])
def test_a_bad_oci_reference_is_refused_before_power_on(env, ramdisk, source, secret, says):
    registry, ironic, _ = env
    if secret == "good":
        secret = f"{registry.user}:{registry.password}"
    name = "oci-bad-" + hashlib.sha256(f"{source}{secret}".encode()).hexdigest()[:8]
    uuid = _enroll(ironic, ramdisk, name, f"oci://{registry.host}/{source}", secret)
    resp = ironic.set_state(uuid, "active", ok=False)
    assert resp.status_code == 400, resp.text
    message = json.loads(json.loads(resp.text)["error_message"])["faultstring"]
    assert (f": instance_info/image_source oci://{registry.host}/{source}: "
            + says.format(host=registry.host)) in message, message
    assert _shows_none(registry, resp.text) == [] and "wrong-password" not in resp.text
    node = ironic.node(uuid)
    assert node["provision_state"] == "available"
    assert "provision_phase" not in node["driver_internal_info"]


def test_the_operators_secret_signs_in_only_to_a_listed_registry(env, ramdisk):
    """driver_info/image_pull_secret is the operator's: a tenant's image_source on a host
    [provision_agent]oci_secret_registries does not list is refused at validate, with the
    credentials sent nowhere; on the listed host the same secret resolves the image."""
    registry, ironic, _ = env
    operators = f"{registry.user}:{registry.password}"
    other = f"localhost:{registry.port}"
    uuid = _enroll(ironic, ramdisk, "oci-operator-unlisted", f"oci://{other}/images/disk:v1",
                   None, operators=operators)
    resp = ironic.set_state(uuid, "active", ok=False)
    assert resp.status_code == 400, resp.text
    message = json.loads(json.loads(resp.text)["error_message"])["faultstring"]
    assert ("the registry wants credentials, and the node's pull secret (driver_info/"
            "image_pull_secret") in message, message
    assert f"which does not list {other}" in message, message
    assert _shows_none(registry, resp.text) == []
    uuid = _enroll(ironic, ramdisk, "oci-operator-listed",
                   f"oci://{registry.host}/images/disk:v1", None, operators=operators)
    ironic.set_state(uuid, "active")
    node = ironic.wait_state(uuid, ["active", "deploy failed"], 120)
    assert node["provision_state"] == "active", node["last_error"]
