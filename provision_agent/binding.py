"""What binds a ramdisk to the Ironic node it looked up: a file the ramdisk's agent writes and
the conductor reads over SSH before it sends that ramdisk anything.

A ramdisk's SSH host key is public, the conductor's key opens every ramdisk, and a heartbeat
names the address and the key to use. So the one thing that tells the conductor which node a
ramdisk belongs to is the agent token Ironic handed to that ramdisk's lookup. The agent writes,
root-only, the node's UUID and an HMAC of that UUID keyed with the token; the conductor, which
keeps the token in driver_internal_info, computes the same and compares. A ramdisk that looked
up another node, or this node in an earlier deploy (a new deploy has a new token), fails.

The file holds an HMAC, not the token: whoever reads it cannot heartbeat as the node.
"""

import hashlib
import hmac
import json
import os
import re

VERSION = 1
MAX_BYTES = 4096
# A node UUID, as Ironic writes it; the file is named by it.
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class Mismatch(Exception):
    """The ramdisk's file does not prove it is this node's ramdisk; the text says why."""


def digest(node_uuid, token):
    message = f"provision-agent ramdisk binding v{VERSION} node {node_uuid}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def render(node_uuid, token):
    return json.dumps({"version": VERSION, "node_uuid": node_uuid,
                       "token_hmac": digest(node_uuid, token)}) + "\n"


def check(data, node_uuid, token):
    """Raises Mismatch unless data (the file's bytes, None when it is missing) binds this
    ramdisk to node_uuid under token."""
    if data is None:
        raise Mismatch("it has no binding file for this node (it looked up another node, or "
                       "it is not a provision ramdisk)")
    if len(data) > MAX_BYTES:
        raise Mismatch(f"its binding file is larger than {MAX_BYTES} bytes")
    try:
        record = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise Mismatch("its binding file is not JSON") from None
    if not isinstance(record, dict) or record.get("version") != VERSION:
        raise Mismatch(f"its binding file is not version {VERSION}")
    if record.get("node_uuid") != node_uuid:
        raise Mismatch("its binding file names another node")
    given = record.get("token_hmac")
    if not isinstance(given, str) or not hmac.compare_digest(given, digest(node_uuid, token)):
        raise Mismatch("its binding file was made with another agent token (an earlier "
                       "deploy or cleaning, or another lookup)")


def path(directory, node_uuid):
    if not UUID_RE.fullmatch(node_uuid or ""):
        raise ValueError(f"not a node UUID: {str(node_uuid)[:40]!r}")
    return os.path.join(directory, node_uuid)


def write(directory, node_uuid, token):
    """The agent's side: the binding to node_uuid, root-only."""
    target = path(directory, node_uuid)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    tmp = target + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(render(node_uuid, token))
    os.rename(tmp, target)
    return target
