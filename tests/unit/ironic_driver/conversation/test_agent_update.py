"""The conductor updating an older ramdisk's provision in place ([provision_agent]
agent_update_wheel), against provision-dispatch run here as the ramdisk's console script runs
it (a new process per request, the update's `current` first on its path): real ssh-keygen
keys and signatures, a wheel of this tree's provision_agent that says it is 99.0.0."""

import base64
import json
import os
import subprocess
import sys
import zipfile

import pytest

from ironic_driver.conversation import agent_update, dispatched
from tests.unit.agent.test_update import keypair

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))))
NEW = "99.0.0"


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory):
    """This tree's provision_agent as a wheel of version NEW, signed by the ramdisk's key and
    by a key the ramdisk does not hold."""
    work = tmp_path_factory.mktemp("artefacts")
    wheel = work / f"provision_agent-{NEW}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for top, dirs, files in os.walk(os.path.join(REPO, "provision_agent")):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(top, name)
                    z.write(path, os.path.relpath(path, REPO))
        z.writestr(f"provision_agent-{NEW}.dist-info/METADATA",
                   f"Metadata-Version: 2.1\nName: provision-agent\nVersion: {NEW}\n")
    good, other = keypair(work, "ramdisk-key"), keypair(work, "other-key")
    for key, suffix in ((other, ".other-sig"), (good, ".sig")):   # WHEEL.sig, as sign writes
        subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-f", str(key), "-n",
                        agent_update.NAMESPACE, str(wheel)], check=True, capture_output=True)
        os.rename(str(wheel) + ".sig", str(wheel) + suffix)
    return work, wheel, good


class Ramdisk:
    """What dispatched.check_version uses of a dispatched.Session: each request runs
    provision-dispatch in a new process, as sshd runs the forced command."""

    def __init__(self, tmp_path, keys_text):
        self.root = tmp_path / "run"
        (tmp_path / "allowed_signers").write_text(keys_text)
        (tmp_path / "cmdline").write_text("console=ttyS0\n")
        self.argv = ["--job_root", str(tmp_path / "jobs"), "--binding_dir", str(tmp_path),
                     "--log_file", str(tmp_path / "dispatch.log"),
                     "--update_keys", str(tmp_path / "allowed_signers"),
                     "--update_root", str(self.root), "--cmdline_file",
                     str(tmp_path / "cmdline")]
        self.requests = []

    def request(self, words, limit=4096, stdin=None):
        self.requests.append(words[0])
        script = ("import os, sys; sys.path.insert(0, os.path.realpath(sys.argv[1])); "
                  "from provision_agent.agent.dispatch import main; sys.exit(main(sys.argv[2:]))")
        env = dict(os.environ, SSH_ORIGINAL_COMMAND=" ".join(words), PYTHONPATH=REPO)
        done = subprocess.run([sys.executable, "-c", script, str(self.root / "current")]
                              + self.argv, input=stdin or b"", capture_output=True, env=env,
                              timeout=60)
        return done.returncode, done.stdout + done.stderr


def signers(key):
    return (f'{agent_update.NAMESPACE} namespaces="{agent_update.NAMESPACE}" '
            f'{open(str(key) + ".pub").read()}')


@pytest.fixture
def newer_conductor(monkeypatch):
    monkeypatch.setattr(dispatched, "our_version", lambda: NEW)


def test_an_older_ramdisk_is_updated_before_the_start(artefacts, tmp_path, newer_conductor):
    work, wheel, key = artefacts
    ramdisk = Ramdisk(tmp_path, signers(key))
    answer = dispatched.check_version(ramdisk, (str(wheel), None), "node")
    assert answer["provision"] == NEW and answer["protocol"] == 1
    assert ramdisk.requests == ["version", "update", "version"]
    assert os.path.isfile(ramdisk.root / "current" / "provision_agent" / "agent" / "update.py")
    # the next look finds it current: nothing is pushed again
    ramdisk.requests.clear()
    assert dispatched.check_version(ramdisk, (str(wheel), None), "node")["provision"] == NEW
    assert ramdisk.requests == ["version"]


def test_a_push_signed_by_another_key_fails_the_step(artefacts, tmp_path, newer_conductor):
    work, wheel, key = artefacts
    ramdisk = Ramdisk(tmp_path, signers(key))
    with pytest.raises(RuntimeError) as exc:
        dispatched.check_version(ramdisk, (str(wheel), str(wheel) + ".other-sig"), "node")
    text = str(exc.value)
    assert "the ramdisk refused the update of its provision" in text and f"to {NEW}" in text
    assert "exit 126" in text and "does not verify against this ramdisk's update keys" in text
    assert not (ramdisk.root / "current").exists()


def test_a_ramdisk_without_update_key_keeps_its_version(artefacts, tmp_path, newer_conductor,
                                                        caplog):
    work, wheel, key = artefacts
    ramdisk = Ramdisk(tmp_path, "")
    answer = dispatched.check_version(ramdisk, (str(wheel), None), "node")
    assert answer["provision"] != NEW and ramdisk.requests == ["version"]
    assert "is not updated in place: it takes no update (disabled: updates are disabled: " \
           "this ramdisk was built without an update key" in caplog.text


def test_no_wheel_configured_no_push(artefacts, tmp_path, newer_conductor):
    work, wheel, key = artefacts
    ramdisk = Ramdisk(tmp_path, signers(key))
    assert dispatched.check_version(ramdisk, None, "node")["provision"] != NEW
    assert ramdisk.requests == ["version"]


class Canned:
    """A ramdisk on an older protocol whose answers are given."""

    def __init__(self, *answers):
        self.answers, self.requests = list(answers), []

    def request(self, words, limit=4096, stdin=None):
        self.requests.append(words[0])
        rc, answer = self.answers.pop(0)
        return rc, (json.dumps(answer) if isinstance(answer, dict) else answer).encode()


def test_an_older_protocol_that_takes_no_update_fails_naming_why(artefacts):
    work, wheel, key = artefacts
    old = {"provision": "0.0.9", "protocol": 0, "commands": ["version", "update"],
           "update": "disabled: updates are disabled by provision.update=off on the kernel "
                     "command line"}
    with pytest.raises(RuntimeError) as exc:
        dispatched.check_version(Canned((0, old)), (str(wheel), None), "node")
    text = str(exc.value)
    assert "provision 0.0.9 (dispatcher protocol 0), older than this conductor's" in text
    assert "not updated in place: it takes no update (disabled: updates are disabled by " \
           "provision.update=off" in text and "rebuild the ramdisk" in text


def test_an_older_protocol_updated_to_one_spoken(artefacts):
    work, wheel, key = artefacts
    old = {"provision": "0.0.9", "protocol": 0, "commands": ["version", "update"],
           "update": "enabled"}
    ramdisk = Canned((0, old), (0, "{}"), (0, {"provision": NEW, "protocol": 1}))
    assert dispatched.check_version(ramdisk, (str(wheel), None), "node")["provision"] == NEW
    assert ramdisk.requests == ["version", "update", "version"]


def test_the_heartbeat_check_waits_for_the_update_only_when_one_is_configured():
    dispatched.check_heartbeat_version("0.0.9 protocol=0", updatable=True)
    with pytest.raises(RuntimeError, match="protocol 0"):
        dispatched.check_heartbeat_version("0.0.9 protocol=0")
    with pytest.raises(RuntimeError, match="no dispatcher protocol"):
        dispatched.check_heartbeat_version("0.0.9", updatable=True)


def test_the_artefact_is_checked_on_the_conductor(tmp_path):
    (tmp_path / "x.whl").write_bytes(b"not a zip")
    (tmp_path / "x.whl.sig").write_bytes(b"sig")
    with pytest.raises(RuntimeError, match="agent_update_wheel: .*x.whl"):
        agent_update.Artefact(str(tmp_path / "x.whl"))
    with pytest.raises(RuntimeError, match="agent_update_signature: cannot read"):
        agent_update.Artefact(str(tmp_path / "x.whl"), str(tmp_path / "missing.sig"))
    assert base64  # the signature travels as base64 (agent_update.push)
