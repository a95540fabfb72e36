"""The conductor's side of an update in place of the ramdisk's provision (the ramdisk's side:
provision_agent/agent/update.py).

With [provision_agent]agent_update_wheel (a wheel of provision-agent) and its signature
(agent_update_signature, `ssh-keygen -Y sign -n provision-agent-update`), a ramdisk whose
`version` answer shows a provision older than this conductor's, or a protocol older than it
speaks, is sent the wheel with the registered command `update` before the job starts, and its
`version` is read again. The ramdisk verifies the signature against the keys baked into it at
build time: the conductor holds no private key, only what the operator signed.
"""

import base64
import email.parser
import logging
import re
import zipfile

from packaging import version as pep440

LOG = logging.getLogger(__name__)
NAMESPACE = "provision-agent-update"
MAX_WHEEL = 32 * 1024 * 1024          # the ramdisk's update.MAX_WHEEL
MAX_SIGNATURE = 2048                  # base64 of it stays under the dispatcher's 3000
ANSWER_BYTES = 4096
METADATA = re.compile(r"provision_agent-[^/]+\.dist-info/METADATA")


class Artefact:
    """The configured wheel, its signature and its version, read and checked once per use."""

    def __init__(self, wheel_path, signature_path=None):
        self.wheel_path = wheel_path
        self.signature_path = signature_path or wheel_path + ".sig"
        self.wheel = _read(self.wheel_path, MAX_WHEEL, "agent_update_wheel")
        self.signature = _read(self.signature_path, MAX_SIGNATURE, "agent_update_signature")
        self.version = wheel_version(self.wheel_path)


def _read(path, limit, option):
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise RuntimeError(f"[provision_agent]{option}: cannot read {path}: {exc}") from None
    if len(data) > limit:
        raise RuntimeError(f"[provision_agent]{option}: {path} is larger than {limit} bytes")
    return data


def wheel_version(path):
    """The provision-agent version in a wheel's METADATA; RuntimeError if it is not one."""
    try:
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if METADATA.fullmatch(n)]
            if len(names) != 1:
                raise RuntimeError(f"[provision_agent]agent_update_wheel: {path} is not a wheel "
                                   "of provision-agent")
            text = z.read(names[0])[:65536].decode("utf-8", errors="replace")
    except (zipfile.BadZipFile, OSError) as exc:
        raise RuntimeError(f"[provision_agent]agent_update_wheel: {path}: {exc}") from None
    return str(email.parser.Parser().parsestr(text, headersonly=True).get("Version", ""))


def older(theirs, ours):
    """True when version text theirs is older than ours (False when either is not PEP 440)."""
    try:
        return pep440.Version(str(theirs)) < pep440.Version(str(ours))
    except pep440.InvalidVersion:
        return False


def why_not(answer, artefact):
    """Why this ramdisk cannot take the artefact, or None when it can."""
    if "update" not in (answer.get("commands") or []):
        return "its dispatcher has no `update` command (built before updates in place)"
    state = str(answer.get("update", ""))
    if state != "enabled":
        return f"it takes no update ({state[:200] or 'it does not say why'})"
    if not older(answer.get("provision"), artefact.version):
        return (f"the configured wheel ({artefact.version}) is not newer than its provision "
                f"({str(answer.get('provision'))[:40]})")
    return None


def push(session, answer, artefact, node_uuid):
    """Sends the update; the ramdisk's new `version` answer is read by the caller.
    RuntimeError with the ramdisk's reason when it refuses."""
    LOG.info("Node %s: updating its ramdisk's provision %s to %s (%s)", node_uuid,
             str(answer.get("provision"))[:40], artefact.version, artefact.wheel_path)
    signature = base64.b64encode(artefact.signature).decode()
    rc, out = session.request(["update", signature], stdin=artefact.wheel, limit=ANSWER_BYTES)
    text = " ".join(out.decode(errors="replace").split())[:500]
    if rc != 0:
        raise RuntimeError(f"the ramdisk refused the update of its provision "
                           f"{str(answer.get('provision'))[:40]} to {artefact.version} "
                           f"({artefact.wheel_path}): exit {rc}: {text}")
    LOG.info("Node %s: its ramdisk's provision is updated in place: %s", node_uuid, text)
