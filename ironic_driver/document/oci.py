"""oci:// images (Ironic 39's OCI registry sources), resolved by Ironic's own OCI code.

Ironic's OciImageService.identify_specific_image does what build_instance_info_for_deploy does
with an oci:// image_source: it signs in with a pull secret (the deploy's own instance_info
`image_pull_secret`; else the operator's, driver_info `image_pull_secret` or
[deploy]image_server_user/_password, but only for a registry the operator lists: see
oci_secret.py, whose gate keeps every Authorization header from hosts it is not for), picks the
artifact whose manifest's `disktype` annotation suits the download (raw first, then qcow2; the
node's cpu_arch against the platform), and returns its blob's URL (image_url), the blob's
digest (image_checksum), the disk format, the compression and the Authorization header made of
the pull secret (image_request_authorization_secret; `Basic base64(user:pass)`, or a registry's
scoped `Bearer` token). That dict goes into instance_info as Ironic would put it there, and the
ironic data driver gives the ramdisk the header for the blob's download only.

build_instance_info_for_deploy itself is not called: its OCI client reads answers of any
size (a manifest, every page of a tag list) with only a per-request timeout. The same Ironic
code runs here on a bounded session (bounded_session.py): MAX_ANSWER bytes an answer,
DEADLINE seconds for the whole resolution, MAX_REDIRECTS. The ramdisk downloads the blob
from the registry whatever image_download_source says (the conductor caches nothing).

Nothing here logs or raises the pull secret or the header: Ironic's messages are scrubbed of
both before they reach an API answer or last_error. Ironic's API masks instance_info fields
named like secrets (`*secret*`) and image_url.
"""

import base64
import logging

import requests
from ironic.common import exception, image_service
from ironic.drivers.modules import deploy_utils

from ironic_driver import ironic_compat, report
from ironic_driver.document import bounded_session, oci_secret
from provision_agent import bounded_http, redact

LOG = logging.getLogger(__name__)

SCHEME = "oci://"
MAX_ANSWER = 4 << 20     # manifests are a few KiB; a long tag list page some hundred
DEADLINE = 30            # validate answers an API call: keep well inside its RPC timeout
MAX_REDIRECTS = 5
# What Ironic's resolution returns that the dry plan at validate needs (not the header).
FOR_VALIDATION = ("image_url", "image_checksum", "image_disk_format")


def from_oci(node):
    return str((node.instance_info or {}).get("image_source") or "").startswith(SCHEME)


def identify(node):
    """Ironic's resolution of the node's oci:// image_source, bounded; InvalidParameterValue
    with a clear reason (and no secret) when it fails."""
    source = node.instance_info["image_source"]
    policy = oci_secret.Policy(node, source)
    auth = policy.auth
    oci = image_service.OciImageService()
    # Ironic's client made its own session; it talks through ours instead.
    session = oci._client.session = bounded_session.BoundedSession(
        oci._client.session, DEADLINE, MAX_ANSWER, MAX_REDIRECTS, gate=policy.gate)
    try:
        oci.set_image_auth(source, auth)
        found = oci.identify_specific_image(
            source, deploy_utils.get_image_download_source(node),
            (node.properties or {}).get("cpu_arch"))
    except Exception as exc:     # Ironic's, requests', ours: each is explained
        why = f"the registry did not answer within {DEADLINE} s" if session.spent() \
            else _why(exc, auth, policy)
        raise exception.InvalidParameterValue(
            _scrub(f"instance_info/image_source {redact.url(source)}: {why}", auth, oci))
    finally:
        session.close()
    if found and found.get("image_request_authorization_secret") and \
            not policy.may_authorize(str(found.get("image_url") or "")):
        # The ramdisk would send it with the blob's download: not to a host it is not for.
        found = dict(found, image_request_authorization_secret=None)
    if not found or not found.get("image_url"):
        raise exception.InvalidParameterValue(
            f"instance_info/image_source {redact.url(source)}: the registry holds no disk "
            "image artifact for it (a manifest with one layer, whose 'disktype' annotation "
            "is raw or qcow2, or none, for this node's cpu_arch)")
    LOG.info("Node %s: %s is the blob %s (%s, %s bytes)", node.uuid, redact.url(source),
             found["image_url"], found.get("image_disk_format"), found.get("image_size"))
    return found


def resolved(instance_info, found):
    """instance_info as Ironic's build_instance_info_for_deploy leaves it for an OCI image."""
    info = dict(instance_info)
    found = dict(found)
    if found.get("image_disk_format") == "unknown" and \
            info.get("image_disk_format") in ("raw", "qcow2"):
        # Ironic drops its 'unknown' for a raw one it was told and lets IPA detect the rest;
        # provision cannot detect, so what the operator said stands.
        found.pop("image_disk_format")
    info.update(found)
    return info


def resolve(task):
    """In prepare: instance_info with the blob's URL, its digest and the header, saved."""
    node = task.node
    node.instance_info = resolved(node.instance_info, identify(node))
    node.save()


def for_validation(instance_info, found):
    """What the dry plan at validate sees: the resolved URL, digest and format, no header."""
    return resolved(instance_info, {k: found[k] for k in FOR_VALIDATION if k in found})


def _why(exc, auth, policy):
    code = getattr(getattr(exc, "response", None), "status_code", None)
    unauthorized = isinstance(exc, exception.ImageServiceAuthenticationRequired) or code == 401
    host, port = policy.registry
    # A secret kept from a host is the likeliest cause of whatever failed next (Ironic's
    # re-authentication after a refused token even ends in a TypeError).
    withheld = policy.why_unauthorized(host + (f":{port}" if port else ""), unauthorized)
    if withheld:
        return withheld
    if unauthorized:
        return ("the registry refused the pull secret (one that signs in with basic "
                "authentication is USER:PASSWORD)" if auth else
                "the registry wants credentials: set instance_info/image_pull_secret "
                "(or driver_info/image_pull_secret) to USER:PASSWORD or a token")
    if isinstance(exc, exception.OciImageTagNotFound):
        return f"no such tag ({exc})"
    if isinstance(exc, exception.ImageNotFound) or code in (403, 404):
        return "no such repository or manifest in the registry (or no access to it)"
    if isinstance(exc, requests.exceptions.SSLError):
        return f"TLS with the registry failed ({ironic_compat.oci_tls_advice()})"
    if isinstance(exc, (requests.ConnectionError, requests.Timeout)):
        return f"cannot reach the registry ({type(exc).__name__})"
    if isinstance(exc, requests.exceptions.TooManyRedirects):
        return f"more than {MAX_REDIRECTS} redirects"
    if isinstance(exc, bounded_http.BodyError):
        return f"the registry's answer was refused: {exc}"
    if isinstance(exc, exception.IronicException):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _scrub(text, auth, oci):
    """text without the pull secret and the header made of it, whatever Ironic put in."""
    secrets = []
    if auth:
        user, password = auth.get("username") or "", auth.get("password") or ""
        secrets += [password, base64.b64encode(f"{user}:{password}".encode()).decode()]
    header = oci._client.get_cached_auth()
    if header:
        secrets += [header, header.partition(" ")[2]]
    for secret in sorted(filter(None, secrets), key=len, reverse=True):
        text = text.replace(secret, redact.MARK)
    return report.bounded(redact.text(text), report.MESSAGE_CHARS)
