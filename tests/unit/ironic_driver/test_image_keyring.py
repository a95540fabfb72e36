"""[provision_agent]image_keyring on Ironic's DB fixtures: validate applies the signature policy
to instance_info/image_signature, the keyring's bytes go to the ramdisk beside the document,
and provision is started with --image_keyring naming them."""

import subprocess
import time

from ironic.common import exception

from ironic_driver.conversation import remote
from ironic_driver.document import sent
from tests.unit.ironic_driver.test_checksum_url import StaticNodeCase

IMAGE = {"image_source": "http://images.example.com/disk.raw",
         "image_os_hash_algo": "sha256", "image_os_hash_value": "a" * 64}
SIG = "http://images.example.com/disk.raw.sig"
KEYRING = b"\x98\x33\x04keyring bytes as gpg --export writes them"


class TestImageKeyring(StaticNodeCase):

    def _keyring(self, data=KEYRING):
        path = self.useFixture(__import__("fixtures").TempDir()).join("keyring.pgp")
        with open(path, "wb") as f:
            f.write(data)
        self.config(image_keyring=path, group="provision_agent")
        return path

    def test_with_a_keyring_an_unsigned_image_is_refused_and_a_signed_one_passes(self):
        self._keyring()
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate, **IMAGE)
        self.assertIn("no signature: a keyring is configured", str(exc))
        self._validate(image_signature=SIG, **IMAGE)

    def test_without_a_keyring_a_signature_is_refused(self):
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate,
                                image_signature=SIG, **IMAGE)
        self.assertIn("a signature is given, but no keyring is configured", str(exc))
        self._validate(**IMAGE)

    def test_a_keyring_that_cannot_be_read_is_refused(self):
        path = self._keyring()
        self.config(image_keyring=path + ".missing", group="provision_agent")
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate,
                                image_signature=SIG, **IMAGE)
        self.assertIn("[provision_agent]image_keyring", str(exc))
        self.assertIn("cannot be read", str(exc))
        self._keyring(b"")
        exc = self.assertRaises(exception.InvalidParameterValue, self._validate,
                                image_signature=SIG, **IMAGE)
        self.assertIn("is empty: not a keyring", str(exc))

    def test_the_keyring_goes_to_the_ramdisk_with_the_document(self):
        self._keyring()
        self.node.instance_info = dict(IMAGE, image_signature=SIG)
        self.node.save()
        self.deploy_waiting()
        start = self.follow_once(True, {"exit_code": None, "events": [], "events_offset": 0,
                                        "tail": ""})
        self.assertEqual(KEYRING, start.call_args.kwargs["keyring"])
        _session, _dir, text, _command = start.call_args.args
        self.assertIn(SIG, text)    # instance_info/image_signature, in the document

    def test_without_a_keyring_none_is_sent(self):
        self.node.instance_info = dict(IMAGE)
        self.node.save()
        self.deploy_waiting()
        start = self.follow_once(True, {"exit_code": None, "events": [], "events_offset": 0,
                                        "tail": ""})
        self.assertIsNone(start.call_args.kwargs["keyring"])

    def test_image_keyring_reads_the_bytes(self):
        path = self._keyring()
        opts = type("Opts", (), {"image_keyring": path})
        self.assertEqual(KEYRING, sent.image_keyring(opts))
        opts.image_keyring = None
        self.assertIsNone(sent.image_keyring(opts))


class LocalSession:
    """What remote.start uses of an ssh.Session, on this machine."""

    def __init__(self):
        self.uploads = {}

    def run(self, command, stdin=None):
        self.commands = getattr(self, "commands", []) + [command]
        done = subprocess.run(["bash", "-c", command], capture_output=True, input=stdin,
                              timeout=10)
        return done.returncode, done.stdout.decode()

    def upload(self, data, path, mode=0o600):
        self.uploads[path] = data
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)


def test_start_uploads_the_keyring_and_names_it_to_provision(tmp_path):
    fake = tmp_path / "fake-provision"
    fake.write_text('#!/bin/sh\necho "args: $*"\nexit 0\n')
    fake.chmod(0o755)
    directory = tmp_path / "job"
    session = LocalSession()
    assert remote.start(session, str(directory), "{}", remote.provision_argv(str(fake), "ironic"),
                        keyring=KEYRING)
    keyring = directory / remote.KEYRING
    deadline = time.monotonic() + 10
    while not (directory / remote.EXIT_CODE).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert keyring.read_bytes() == KEYRING
    assert f"--image_keyring {keyring}" in (directory / remote.OUTPUT).read_text()
    # a new job clears it with the other files of the last one
    assert subprocess.run(["bash", "-c", remote.prepare_command(str(directory))]).returncode == 0
    assert not keyring.exists()
