"""The conversation with a ramdisk whose conductor key is forced into provision-dispatch
([provision_agent]ramdisk_commands = true; provision_agent/agent/dispatch.py): registered
commands instead of shell text and SFTP.

Session wraps an ssh.Session so that remote.verify_binding and remote.status keep reading
"files": a read of <remote_dir>/<node>/<file> becomes `read NODE FILE OFFSET LIMIT`, a read of
<binding_dir>/<node> becomes `binding NODE`; any other path is refused here, before it is
sent. start() is the job's start as one registered command with the document on stdin.
check_version() runs `version` before a job starts: a ramdisk that does not speak a protocol
this conductor speaks fails the step at once, naming both versions and what to do.
"""

import importlib.metadata
import json
import logging
import posixpath
import re
import shlex

from ironic_driver.conversation import (
    agent_update,
    remote,
)
from provision_agent import binding

LOG = logging.getLogger(__name__)
PROTOCOLS = (1,)          # the dispatcher protocols this conductor speaks
FILES = (remote.EXIT_CODE, remote.EVENTS, remote.OUTPUT, remote.LOG, "recovery-keys.json")
FLAGS = ("--dry_run",)    # provision_extra_args a dispatcher accepts (ramdisk_commands.FLAGS)
MISSING = 3
REFUSED = 126
VERSION_BYTES = 4096
REBUILD = ("rebuild the ramdisk with this conductor's provision-agent (ramdisk/build.sh "
           "--conductor-key KEY.pub) and upload it as the node's deploy kernel and ramdisk")


class Session:
    """An ssh.Session that reads through registered commands (see the module's doc)."""

    def __init__(self, session, remote_dir, binding_dir):
        self.session = session
        self.remote_dir = remote_dir
        self.binding_dir = binding_dir

    def __getattr__(self, name):
        return getattr(self.session, name)

    def request(self, words, limit=remote.EVENTS_BYTES_PER_POLL + 4096, stdin=None):
        """(exit status, output bytes) of one registered command."""
        return self.session.run(" ".join(shlex.quote(str(w)) for w in words), limit=limit,
                                stdin=stdin, raw=True)

    def read(self, path, offset=0, limit=4096):
        words = self._request_for(path)
        rc, out = self.request(words + ([offset, limit] if words[0] == "read" else []),
                               limit=limit + 4096)
        if rc == MISSING and not out:
            return None
        if rc != 0:
            raise remote.BadRamdisk(f"its dispatcher answered {' '.join(words[:3])} with exit "
                                    f"{rc}: {out[:300].decode(errors='replace').strip()}")
        if len(out) > limit:
            raise remote.BadRamdisk(f"it answered a read of {limit} bytes with {len(out)}")
        return out[:limit]

    def _request_for(self, path):
        directory, name = posixpath.split(path)
        if directory == self.binding_dir.rstrip("/") and binding.UUID_RE.fullmatch(name):
            return ["binding", name]
        root, node = posixpath.split(directory)
        if root == self.remote_dir.rstrip("/") and binding.UUID_RE.fullmatch(node) \
                and name in FILES:
            return ["read", node, name]
        raise ValueError(f"{path} is not a file a dispatcher serves")


def our_version():
    try:
        return importlib.metadata.version("provision-agent")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def check_version(session, update_from=None, node_uuid=""):
    """The ramdisk's `version` answer; RuntimeError naming both versions when this conductor
    cannot speak to it. update_from: (wheel, signature) paths of [provision_agent]
    agent_update_wheel: a ramdisk older than this conductor is updated in place first
    (agent_update.py), and a refusal fails the step with the ramdisk's reason."""
    ours = our_version()
    answer = _ask_version(session, ours)
    stale = answer["protocol"] < min(PROTOCOLS) or agent_update.older(answer.get("provision"),
                                                                      ours)
    why = None
    if stale and update_from:
        artefact = agent_update.Artefact(*update_from)
        why = agent_update.why_not(answer, artefact)
        if why is None:
            agent_update.push(session, answer, artefact, node_uuid)
            answer = _ask_version(session, ours)
            if answer.get("provision") != artefact.version:
                raise RuntimeError(
                    f"the ramdisk took the update to provision {artefact.version} but its "
                    f"`version` still says {str(answer.get('provision'))[:40]}")
        else:
            LOG.warning("Node %s: its ramdisk runs provision %s, older than this conductor's "
                        "%s, and is not updated in place: %s", node_uuid,
                        str(answer.get("provision"))[:40], ours, why)
    if answer["protocol"] not in PROTOCOLS:
        age = "older" if answer["protocol"] < min(PROTOCOLS) else "newer"
        raise RuntimeError(
            f"the ramdisk runs provision {str(answer.get('provision'))[:40]} (dispatcher "
            f"protocol {answer['protocol']}), {age} than this conductor's provision {ours} "
            f"(protocol {'/'.join(map(str, PROTOCOLS))}): "
            + (f"not updated in place: {why}; " if why else "") + REBUILD)
    return answer


def _ask_version(session, ours):
    rc, out = session.request(["version"], limit=VERSION_BYTES)
    try:
        answer = json.loads(out) if rc == 0 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("protocol"), int):
        raise RuntimeError(
            f"the ramdisk does not answer `version` (exit {rc}: "
            f"{out[:200].decode(errors='replace').strip()}): it has no provision-dispatch, or "
            f"its key is not forced into it; this conductor runs provision {ours} and speaks "
            f"dispatcher protocol {'/'.join(map(str, PROTOCOLS))}: {REBUILD}")
    return answer


PROTOCOL_RE = re.compile(r"protocol=([0-9]{1,4})")


def check_heartbeat_version(agent_version, updatable=False):
    """RuntimeError naming both versions when a heartbeat's agent_version (provision-ironic-
    agent's `VERSION protocol=N`) shows a ramdisk this conductor cannot speak to: the step
    fails at the first heartbeat instead of at the first command. updatable (an update
    configured): an older protocol waits for the start, which updates it in place or fails."""
    text = str(agent_version or "")[:100]
    match = PROTOCOL_RE.search(text)
    if match and int(match.group(1)) in PROTOCOLS:
        return
    if match and updatable and int(match.group(1)) < min(PROTOCOLS):
        return
    age = ("older" if not match or int(match.group(1)) < min(PROTOCOLS) else "newer")
    theirs = f"protocol {match.group(1)}" if match else "no dispatcher protocol"
    raise RuntimeError(
        f"the ramdisk's agent is {text!r} ({theirs}), "
        f"{age} than this conductor's provision {our_version()} (protocol "
        f"{'/'.join(map(str, PROTOCOLS))}): {REBUILD}")


def start_words(what, node_uuid, job, data_driver, extra_args, keyring=False):
    """The `start` request; RuntimeError for provision_extra_args a dispatcher refuses."""
    other = [a for a in extra_args if a not in FLAGS]
    if other:
        raise RuntimeError(f"[provision_agent]provision_extra_args {other[:4]} cannot be sent "
                           f"to a ramdisk with registered commands (it accepts {list(FLAGS)}); "
                           "give them to its provision-dispatch (--provision_arg) instead")
    words = ["start", what, node_uuid, job]
    words += [f"--data_driver={data_driver}"] if data_driver and what == "provision" else []
    words += [f"--flag={a}" for a in extra_args]
    return words + (["--keyring=1"] if keyring else [])


def start(session, what, node_uuid, job, document_text, data_driver, extra_args,
          keyring=None):
    """True when provision started; False when it was running, or this job had finished."""
    if keyring is not None:
        data = keyring.encode() if isinstance(keyring, str) else keyring
        rc, out = session.request(["keyring", node_uuid, job], stdin=data, limit=4096)
        if rc != 0:
            raise RuntimeError(f"cannot send the keyring: exit {rc}: {out[:300]!r}")
        if out.strip().decode() in (remote.RUNNING, remote.FINISHED):
            return False
    words = start_words(what, node_uuid, job, data_driver, extra_args, keyring is not None)
    rc, out = session.request(words, stdin=document_text.encode(), limit=4096)
    text = out.decode(errors="replace").strip()
    if rc != 0:
        raise RuntimeError(f"cannot start provision in the ramdisk: exit {rc}: {text[:500]}")
    return text not in (remote.RUNNING, remote.FINISHED)
