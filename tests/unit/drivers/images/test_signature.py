"""Signed images: sqv over the download as it streams, the policy, and the held-back first MiB.

Real keys (gpg, tests/signing_keys.py), the real sqv through the real Runner; targets are
regular files, read back after each run. Block devices: tests/functional/test_signed_loop.py.
"""

import gzip
import hashlib
import io
import logging
import os
import subprocess
import tarfile
import threading

import pytest

from provision_agent.drivers.images import holdback, signature, write_step, writer
from provision_agent.errors import EXIT_IMAGE_ERROR, ImageError
from provision_agent.run.runner import Runner
from tests import signing_keys as keys
from tests.unit.drivers.images import test_sources, test_writer

pytestmark = keys.require()
http_server = test_sources.http_server     # the fixtures, shared
signing_keys = keys.signing_keys


def blkid_type(path):
    out = subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", str(path)],
                         capture_output=True, text=True)
    return out.stdout.strip() or None


@pytest.fixture(scope="module")
def ext4_image(tmp_path_factory):
    """A gzip'd 8 MiB ext4 image with a file in it: (its path, the raw bytes)."""
    where = tmp_path_factory.mktemp("ext4")
    raw, tree = where / "root.ext4", where / "tree"
    tree.mkdir()
    (tree / "hello").write_text("signed\n")
    subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(tree), str(raw), "8M"], check=True,
                   capture_output=True)
    data = raw.read_bytes()
    path = where / "root.ext4.gz"
    path.write_bytes(gzip.compress(data, 1))
    return path, data


def holds_the_image(target):
    """The target is the test's ext4 (grown and checked by the writer, so not byte for byte
    the image): its file reads back."""
    out = subprocess.run(["debugfs", "-R", "cat /hello", str(target)], capture_output=True,
                         text=True)
    return blkid_type(target) == "ext4" and out.stdout == "signed\n"


def args_for(image, target, **extra):
    return {"uri": str(image), "device": str(target), "format": "raw",
            "allow_no_checksum": True, **extra}


def write(args, keyring=None, tmp_path=None):
    options = {"image_keyring": keyring} if keyring else {}
    return write_step.write_image(args, runner=Runner(), events=None,
                              target_root=str(tmp_path or "/nonexistent"), options=options)


def test_a_signed_image_is_written_once_its_signature_verifies(tmp_path, ext4_image,
                                                              signing_keys):
    image, raw = ext4_image
    target = tmp_path / "target.img"
    result = write(args_for(image, target, signature=signing_keys.sign(image)),
                   signing_keys.keyring)
    assert result["signature"] == "verified"
    assert holds_the_image(target)


@pytest.mark.parametrize("compression", ["none", "gzip", "xz", "bzip2", "zstd"])
@pytest.mark.parametrize("checksum_of", ["compressed", "raw"])
def test_every_compression_verifies_with_its_checksum_beside_it(tmp_path, ext4_image,
                                                                signing_keys, compression,
                                                                checksum_of):
    """The verifier reads the bytes as downloaded whatever reads them next: the hashing
    thread, or the decompressor (each reads to the end of the download)."""
    _, raw = ext4_image
    packed = test_writer.COMPRESS[compression](raw)
    image = tmp_path / f"root.ext4.{compression}"
    image.write_bytes(packed)
    digest = hashlib.sha256(packed if checksum_of == "compressed" else raw).hexdigest()
    target = tmp_path / "target.img"
    result = write(args_for(image, target, signature=signing_keys.sign(image),
                            checksum=f"sha256:{digest}", checksum_of=checksum_of,
                            allow_no_checksum=False), signing_keys.keyring)
    assert result["signature"] == "verified" and result["checksum"] == f"sha256:{digest}"
    assert holds_the_image(target)
    # the same image under another's signature fails whatever the checksum said
    with pytest.raises(ImageError, match="does not verify"):
        write(args_for(image, target, signature=signing_keys.stranger_sign(image),
                       checksum=f"sha256:{digest}", checksum_of=checksum_of),
              signing_keys.keyring)
    assert target.read_bytes() == b""


@pytest.mark.parametrize("given", ["http", "file", "path"])
def test_the_signature_may_be_a_url_or_a_path(tmp_path, http_server, ext4_image, signing_keys,
                                              given):
    image, raw = ext4_image
    sig = tmp_path / "root.ext4.gz.asc"
    sig.write_text(signing_keys.sign(image))
    http_server.files["root.ext4.gz.asc"] = sig.read_bytes()
    where = {"http": http_server.url + "root.ext4.gz.asc", "file": f"file://{sig}",
             "path": str(sig)}[given]
    target = tmp_path / "target.img"
    result = write(args_for(image, target, signature=where), signing_keys.keyring)
    assert result["signature"] == "verified"
    assert holds_the_image(target)


def test_a_binary_signature_file_verifies_too(tmp_path, ext4_image, signing_keys):
    image, raw = ext4_image
    sig = tmp_path / "root.sig"
    armoured = tmp_path / "root.asc"
    armoured.write_text(signing_keys.sign(image))
    subprocess.run(["gpg", "--batch", "--dearmor", "-o", str(sig), str(armoured)], check=True,
                   env=dict(os.environ, GNUPGHOME=signing_keys.home["signer"]))
    target = tmp_path / "target.img"
    write(args_for(image, target, signature=str(sig)), signing_keys.keyring)
    assert holds_the_image(target)


@pytest.mark.parametrize("case", ["stranger", "tampered", "not-a-signature"])
def test_a_bad_signature_is_exit_5_and_the_target_is_wiped(tmp_path, ext4_image, signing_keys,
                                                           case):
    image, raw = ext4_image
    if case == "tampered":
        # the signature of the image as published, over a copy with one byte changed
        sig = signing_keys.sign(image)
        changed = bytearray(raw)
        changed[5000] ^= 1
        image = tmp_path / "tampered.ext4.gz"
        image.write_bytes(gzip.compress(bytes(changed), 1))
    elif case == "stranger":
        sig = signing_keys.stranger_sign(image)
    else:
        sig = NOT_A_SIGNATURE
    target = tmp_path / "target.img"
    target.write_bytes(raw)     # an earlier system's filesystem, which must go too
    with pytest.raises(ImageError) as caught:
        write(args_for(image, target, signature=sig), signing_keys.keyring)
    assert caught.value.exit_code == EXIT_IMAGE_ERROR
    assert "does not verify against the keyring" in str(caught.value)
    # sqv's own reason, for this failure and not another (a file it could not open)
    reason = {"stranger": "Missing key", "tampered": "Message has been manipulated",
              "not-a-signature": "Malformed packet"}[case]
    assert reason in str(caught.value)
    assert target.read_bytes() == b"" and blkid_type(target) is None


class Watching:
    """A Verifier whose verdict first records what the target looks like at that moment."""

    def __init__(self, real, target):
        self.real, self.target, self.seen = real, target, None

    def __getattr__(self, name):
        return getattr(self.real, name)

    def verdict(self):
        data = self.target.read_bytes()
        self.seen = {"first_mib_zero": data[:holdback.HOLD] == bytes(holdback.HOLD),
                     "size": len(data), "type": blkid_type(self.target)}
        return self.real.verdict()


@pytest.mark.parametrize("good", [True, False])
def test_the_first_mib_is_held_back_until_the_verdict(tmp_path, ext4_image, signing_keys, good):
    image, raw = ext4_image
    sig_path = signature.load(signing_keys.sign(image) if good
                              else signing_keys.stranger_sign(image), tmp_dir=str(tmp_path))
    target = tmp_path / "target.img"
    runner = Runner()
    watch = Watching(signature.Verifier(runner, signing_keys.keyring, sig_path, str(image)),
                     target)
    try:
        if good:
            writer.write_to(str(image), str(target), fmt="raw", allow_no_checksum=True,
                            runner=runner, verifier=watch, grow=False)
        else:
            with pytest.raises(ImageError):
                writer.write_to(str(image), str(target), fmt="raw", allow_no_checksum=True,
                                runner=runner, verifier=watch, grow=False)
    finally:
        watch.close()
    # while the verifier judged, the rest of the image was on the target, but not its first
    # MiB: no superblock to find
    assert watch.seen == {"first_mib_zero": True, "size": len(raw), "type": None}
    if good:
        assert target.read_bytes() == raw and blkid_type(target) == "ext4"
    else:
        assert target.read_bytes() == b""


def test_an_unsigned_image_is_refused_under_a_keyring_before_the_target_is_touched(
        tmp_path, ext4_image, signing_keys):
    image, _ = ext4_image
    target = tmp_path / "target.img"
    target.write_bytes(b"untouched")
    with pytest.raises(ImageError, match="unsigned images are refused unless the image sets "
                                         "allow_unsigned") as caught:
        write(args_for(image, target), signing_keys.keyring)
    assert caught.value.exit_code == EXIT_IMAGE_ERROR
    assert target.read_bytes() == b"untouched"


def test_allow_unsigned_writes_it_unverified(tmp_path, ext4_image, signing_keys):
    image, raw = ext4_image
    target = tmp_path / "target.img"
    result = write(args_for(image, target, allow_unsigned=True), signing_keys.keyring)
    assert result["signature"] == "none"
    assert holds_the_image(target)


def test_a_signature_without_a_keyring_is_refused_before_the_target_is_touched(
        tmp_path, ext4_image, signing_keys):
    image, _ = ext4_image
    target = tmp_path / "target.img"
    target.write_bytes(b"untouched")
    with pytest.raises(ImageError, match=r"no keyring is configured.*--image_keyring"):
        write(args_for(image, target, signature=signing_keys.sign(image)))
    assert target.read_bytes() == b"untouched"


def test_without_keyring_or_signature_nothing_changes(tmp_path, ext4_image):
    image, raw = ext4_image
    target = tmp_path / "target.img"
    assert write(args_for(image, target))["signature"] == "none"
    assert holds_the_image(target)


def test_a_missing_keyring_file_is_refused_before_the_target_is_touched(tmp_path, ext4_image,
                                                                       signing_keys):
    image, _ = ext4_image
    target = tmp_path / "target.img"
    target.write_bytes(b"untouched")
    with pytest.raises(ImageError, match="is not a readable file"):
        write(args_for(image, target, signature=signing_keys.sign(image)),
              str(tmp_path / "nowhere.pgp"))
    assert target.read_bytes() == b"untouched"


def _tar(tmp_path, files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path = tmp_path / "root.tar"
    path.write_bytes(buf.getvalue())
    return path


@pytest.mark.parametrize("good", [True, False])
def test_a_tar_image_is_extracted_and_taken_back_when_its_signature_fails(
        tmp_path, signing_keys, good):
    image = _tar(tmp_path, {"etc/hostname": b"node\n", "boot/vmlinuz-6.1": b"kernel"})
    root = tmp_path / "target"
    (root / "mnt").mkdir(parents=True)
    sig = signing_keys.sign(image) if good else signing_keys.stranger_sign(image)
    args = {"uri": str(image), "format": "tar", "mount_point": "/mnt",
            "allow_no_checksum": True, "signature": sig}
    options = {"image_keyring": signing_keys.keyring}
    run = lambda: write_step.write_image(args, runner=Runner(), events=None,  # noqa: E731
                                     target_root=str(root), options=options)
    if good:
        run()
        assert (root / "mnt" / "etc" / "hostname").read_bytes() == b"node\n"
    else:
        with pytest.raises(ImageError, match="does not verify"):
            run()
        assert os.listdir(root / "mnt") == []


NOT_A_SIGNATURE = ("-----BEGIN PGP SIGNATURE-----\n\nbm90IGEgc2lnbmF0dXJl\n"
                   "-----END PGP SIGNATURE-----\n")


def test_a_verifier_that_stops_early_ends_the_download_early(tmp_path, signing_keys):
    """sqv refuses a signature it cannot parse before it reads its input: the download is
    abandoned then, not read to its end first (a keyring it cannot parse, sqv only reads
    after hashing the data: that fails at the end)."""
    fifo = tmp_path / "endless.img"
    os.mkfifo(fifo)
    fed = []

    def serve():    # up to 8 GiB of zeros, until the reader goes away
        chunk = bytes(1 << 20)
        try:
            with open(fifo, "wb") as f:
                for _ in range(8 << 10):
                    f.write(chunk)
                    fed.append(len(chunk))
        except BrokenPipeError:
            pass

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    target = tmp_path / "target.img"
    with pytest.raises(ImageError, match="does not verify.*Malformed") as caught:
        write(args_for(fifo, target, signature=NOT_A_SIGNATURE, compression="none"),
              signing_keys.keyring)
    server.join(timeout=60)
    assert "endless.img" in str(caught.value)
    assert not server.is_alive() and sum(fed) < 1 << 30
    assert not target.exists() or target.read_bytes() == b""


def test_the_keyring_is_judged_at_the_end(tmp_path, ext4_image, signing_keys):
    image, _ = ext4_image
    bad_keyring = tmp_path / "keyring.pgp"
    bad_keyring.write_bytes(b"not a keyring")
    target = tmp_path / "target.img"
    with pytest.raises(ImageError, match="does not verify.*keyring"):
        write(args_for(image, target, signature=signing_keys.sign(image)), str(bad_keyring))
    assert target.read_bytes() == b""


def test_nothing_of_the_signature_is_shown(tmp_path, ext4_image, signing_keys, caplog):
    image, _ = ext4_image
    sig = signing_keys.stranger_sign(image)
    body = sig.splitlines()[2]      # the armour's first line of base64
    target = tmp_path / "target.img"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ImageError) as caught:
        write(args_for(image, target, signature=sig), signing_keys.keyring)
    assert body not in str(caught.value) and body not in caplog.text
    assert signature.shown(sig) == "inline"
    assert signature.shown("https://u:pw@h/x.sig?temp_url_sig=s") == "https://h/x.sig?…"


@pytest.mark.parametrize("given", ["http", "path"])
def test_a_signature_larger_than_64_kib_is_refused_before_the_target_is_touched(
        tmp_path, http_server, ext4_image, signing_keys, given):
    image, _ = ext4_image
    big = tmp_path / "big.sig"
    big.write_bytes(b"\x89" * (signature.MAX_BYTES + 1))
    http_server.files["big.sig"] = big.read_bytes()
    where = http_server.url + "big.sig" if given == "http" else str(big)
    target = tmp_path / "target.img"
    target.write_bytes(b"untouched")
    with pytest.raises(ImageError, match="65536 bytes.*not a (detached )?signature"):
        write(args_for(image, target, signature=where), signing_keys.keyring)
    assert target.read_bytes() == b"untouched"


@pytest.mark.parametrize("good", [True, False])
def test_a_qcow2_is_converted_only_once_its_signature_verified(tmp_path, ext4_image,
                                                              signing_keys, good):
    from tests.unit.drivers.images.test_parts import need
    need("qemu-img")
    _, raw = ext4_image
    plain = tmp_path / "root.raw"
    plain.write_bytes(raw)
    image = tmp_path / "root.qcow2"
    subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(plain), str(image)],
                   check=True)
    sig = signing_keys.sign(image) if good else signing_keys.stranger_sign(image)
    target = tmp_path / "target.img"
    args = dict(args_for(image, target, signature=sig), format="qcow2")
    if good:
        write(args, signing_keys.keyring)
        assert target.read_bytes()[:len(raw)] == raw
    else:
        with pytest.raises(ImageError, match="does not verify"):
            write(args, signing_keys.keyring)
        assert not target.exists()
