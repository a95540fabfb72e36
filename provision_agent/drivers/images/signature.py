"""Detached OpenPGP signatures of images, checked over the bytes as downloaded while they
stream: no second pass over the image, and no copy of it kept anywhere.

The verifier is sqv (Sequoia's signature verifier; docs/security.md says why not gpgv). It runs
through the runner's streaming helper in a thread of its own, reading the download on its
stdin: a Tee in the pipeline hands it each chunk as the fetch thread brings it in. sqv hashes
as it reads and only answers at the end of its input, so the writer holds back what makes an
image visible (holdback.py) until verdict() says yes.

The signature itself is a small side file (a URL, a local path, or armour given inline). It is
read before the target is touched, kept in a private temporary file for sqv, and never shown:
logs, errors and plans name its URL without user info or query, or say it was inline.
"""

import contextlib
import logging
import os
import queue
import tempfile
import threading
import urllib.parse

from provision_agent import redact
from provision_agent.errors import CommandError, ImageError

LOG = logging.getLogger(__name__)

VERIFIER = "sqv"
ARMOUR = "-----BEGIN PGP SIGNATURE-----"
# A detached signature is a few hundred bytes; a file this large is something else.
MAX_BYTES = 64 << 10
# sqv's answer once the whole image was fed: hashing is done by then, so this is generous.
VERDICT_SECONDS = 120
# What sqv opens to read the pipe (it takes no "-"). Not /dev/stdin: the ramdisk's devtmpfs
# has no such link (udev does not make it), and sqv failed there with "No such file".
STDIN = "/proc/self/fd/0"
_END = object()
_ABORT = object()


def shown(signature):
    """What may be said of a signature: its URL shortened, or that it was given inline."""
    if not signature:
        return "none"
    return "inline" if signature.lstrip().startswith(ARMOUR) else redact.url(signature)


def policy(args, keyring, uri):
    """Whether this write_image step's image is verified; ImageError (before the target is
    touched) when the rules refuse it. The same rules are checked at plan time
    (plan/signing.py); these hold for a plan made elsewhere too."""
    signature = args.get("signature")
    if signature and not keyring:
        raise ImageError(f"image {redact.url(uri)} carries a signature, but no keyring is "
                         "configured to check it against (--image_keyring)")
    if keyring and not signature:
        if not args.get("allow_unsigned"):
            raise ImageError(f"image {redact.url(uri)} has no signature and a keyring is "
                             "configured (--image_keyring): unsigned images are refused "
                             "unless the image sets allow_unsigned")
        LOG.warning("image %s: written without a signature (allow_unsigned)", redact.url(uri))
        return False
    if signature and not os.path.isfile(keyring):
        raise ImageError(f"the keyring {keyring} (--image_keyring) is not a readable file")
    return bool(signature)


@contextlib.contextmanager
def checked(args, options, runner, headers):
    """A Verifier for a write_image step's image (None for an image not verified), with its
    signature read; stopped and its file removed on the way out."""
    if not policy(args, options.get("image_keyring"), args["uri"]):
        yield None
        return
    path = load(args["signature"], tls_verify=not options.get("image_insecure"),
                ca_bundle=options.get("image_ca_bundle"), headers=headers)
    verifier = None
    try:
        verifier = Verifier(runner, options["image_keyring"], path, args["uri"])
        yield verifier
    finally:
        if verifier:
            verifier.close()
        os.unlink(path)


def load(signature, tmp_dir=None, **http):
    """The signature's bytes in a private temporary file (its path); the caller removes it.
    http: tls_verify, ca_bundle, headers for a signature given as an http(s) URL."""
    if signature.lstrip().startswith(ARMOUR):
        data = signature.encode("ascii", "replace")
    elif signature.startswith(("http://", "https://")):
        from provision_agent.drivers.images import checksum_file  # requests: only here
        data = checksum_file.fetch(signature, what="signature", limit=MAX_BYTES, text=False,
                                   **http)
    else:
        data = _local(signature)
    if not data.strip():
        raise ImageError(f"signature {shown(signature)} is empty")
    fd, path = tempfile.mkstemp(prefix="provision-signature-", dir=tmp_dir)
    with os.fdopen(fd, "wb") as f:      # mkstemp: mode 0600
        f.write(data)
    return path


def _local(signature):
    path = urllib.parse.urlparse(signature).path if signature.startswith("file:") else signature
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise ImageError(f"signature {shown(signature)}: cannot read it: {exc.strerror}") \
            from None
    if len(data) > MAX_BYTES:
        raise ImageError(f"signature {shown(signature)}: more than {MAX_BYTES} bytes; that "
                         "is not a detached signature")
    return data


class Verifier:
    """sqv over the stream: put() each downloaded chunk in order, end() at the end of the
    download, then verdict(). close() stops it whatever happened."""

    def __init__(self, runner, keyring, signature_path, uri, depth=8):
        self._argv = [VERIFIER, "--keyring", keyring, signature_path, STDIN]
        self._runner = runner
        self._uri = redact.url(uri)
        self._q = queue.Queue(maxsize=depth)
        self._gone = threading.Event()
        self._error = None
        self._result = None
        self.ended = False
        self._thread = threading.Thread(target=self._run, name="image-verify", daemon=True)
        self._thread.start()

    def _run(self):
        try:
            self._result = self._runner.run_feeding(self._argv, self._feed,
                                                    timeout=VERDICT_SECONDS)
        except BaseException as exc:    # judged in verdict()
            self._error = exc
        finally:
            self._gone.set()

    def _feed(self, write):
        while True:
            data = self._q.get()
            if data is _END:
                return
            if data is _ABORT:
                raise ImageError("image write abandoned")   # the runner kills sqv
            write(data)

    def _hand(self, item):
        while not self._gone.is_set():
            try:
                self._q.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def put(self, data):
        if not self._hand(data):
            # sqv gave up before the end of the image: no need to download the rest
            self._thread.join()
            raise self._failure(self._error or "it stopped before the end of the image")

    def end(self):
        self.ended = True

    def verdict(self):
        """The signer's fingerprint as sqv prints it; ImageError unless the signature holds
        for every byte of the download."""
        if not self.ended:
            self.close()
            raise self._failure("the download was not read to its end")
        self._hand(_END)
        self._thread.join()
        if self._error is not None:
            raise self._failure(self._error)
        fingerprint = self._result.stdout.strip().splitlines()[-1:] or ["?"]
        LOG.info("image %s: signature verified (key %s)", self._uri, fingerprint[0])
        return fingerprint[0]

    def _failure(self, why):
        if isinstance(why, CommandError):
            tail = " ".join(" ".join(why.stderr.strip().splitlines()[-3:]).split())[:300]
            why = f"{VERIFIER}: {tail}" if tail else str(why)
        return ImageError(f"image {self._uri}: the signature does not verify against the "
                          f"keyring ({why})")

    def close(self):
        if not self._gone.is_set():
            self._hand(_ABORT)
        self._thread.join(timeout=10)


class Tee:
    """Passes a reader's bytes through and hands each chunk to a Verifier. No readinto(): the
    chunks handed on are the reader's own immutable bytes, never a buffer refilled later."""

    def __init__(self, reader, verifier):
        self._src = reader
        self._verifier = verifier

    def read(self, n):
        data = self._src.read(n)
        if data:
            self._verifier.put(data)
        else:
            self._verifier.end()
        return data

    def close(self):
        self._src.close()
