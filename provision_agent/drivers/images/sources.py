"""Where image bytes come from: a local file or HTTP(S), as file-like readers with read(n).

Sources are stevedore plugins in the namespace `provision_agent.image_sources`, keyed by URI
scheme; the built-in ones are also reachable without the entry points installed (a source
checkout run in place). Every failure is an ImageError that names the URL and what was
expected, so the operator does not have to guess from a traceback.
"""

import logging
import os
import time
import urllib.parse

import requests
import tenacity

from provision_agent import bounded_http, redact
from provision_agent.drivers.images.stall import StallWatch
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

NAMESPACE = "provision_agent.image_sources"
CONNECT_TIMEOUT = 15
READ_TIMEOUT = 60
# A download that brings fewer bytes than this in that many seconds has stalled (a dripping
# server never trips the per-read timeout); configurable: --image_stall_seconds/_bytes.
STALL_BYTES = 1 << 20
STALL_SECONDS = 120
RETRIES = 5


class FileSource:
    def __init__(self, uri, **_opts):
        path = urllib.parse.urlparse(uri).path if uri.startswith("file:") else uri
        self.uri = uri
        try:
            self._f = open(path, "rb", buffering=0)
            self.size = os.fstat(self._f.fileno()).st_size
        except OSError as exc:
            raise ImageError(f"image {uri}: cannot open {path}: {exc.strerror}") from exc

    def read(self, n):
        try:
            return self._f.read(n)
        except OSError as exc:
            raise ImageError(f"image {self.uri}: read failed: {exc}") from exc

    def readinto(self, view):
        try:
            return self._f.readinto(view)
        except OSError as exc:
            raise ImageError(f"image {self.uri}: read failed: {exc}") from exc

    def close(self):
        self._f.close()


class _Dropped(Exception):
    """The connection broke mid-stream; retried (with Range) when the server allows it."""


class _Unreachable(_Dropped):
    """No answer at all (refused, unreachable, timed out, HTTP 5xx): once the download has
    begun, an outage, retried until the stall deadline since the last byte (not a count)."""


class HttpSource:
    """A streamed GET that resumes with a Range request after a dropped connection.

    Content-Encoding is never asked for nor undone here (decode_content=False): the bytes
    checksummed and decompressed are exactly the bytes the server stores. A redirect's body is
    never read (requests would read all of it, inflated).
    """

    def __init__(self, uri, *, tls_verify=True, ca_bundle=None, headers=None,
                 timeout=(CONNECT_TIMEOUT, READ_TIMEOUT), retries=RETRIES,
                 stall_bytes=STALL_BYTES, stall_seconds=STALL_SECONDS, **_opts):
        self.uri = uri
        self.shown = redact.url(uri)
        self._stall = StallWatch(stall_bytes, stall_seconds)
        self._session = requests.Session()
        self._session.headers.update(bounded_http.NO_ENCODING)
        self._session.headers.update(headers or {})
        self._session.hooks.update(bounded_http.hooks())
        self._verify = ca_bundle or tls_verify
        self._timeout = timeout
        self._retries = retries
        self.size = None
        self._ranges = False
        self._done = 0
        self._resp = None
        self._last_byte = None      # monotonic time of the last byte; None before the first
        self._open(first=True)

    def _retrying(self):
        return tenacity.Retrying(
            stop=self._give_up,
            wait=tenacity.wait_exponential(multiplier=0.2, max=5),
            retry=tenacity.retry_if_exception_type(_Dropped), reraise=True)

    def _give_up(self, state):
        """An outage after the download began (the server or the network gone for minutes)
        is ridden out until the stall deadline has passed since the last byte; a server that
        answers and drops, or one that never answered, gets `retries` attempts."""
        outage = isinstance(state.outcome.exception(), _Unreachable)
        if outage and self._last_byte is not None and self._stall.seconds:
            return self._outage_seconds() >= self._stall.seconds
        return state.attempt_number >= self._retries

    def _outage_seconds(self):
        return time.monotonic() - self._last_byte

    def _open(self, first=False):
        for attempt in self._retrying():
            with attempt:
                self._connect(first)

    def _connect(self, first):
        headers = {} if first else {"Range": f"bytes={self._done}-"}
        try:
            resp = self._session.get(self.uri, stream=True, timeout=self._timeout,
                                     verify=self._verify, headers=headers)
        except requests.exceptions.SSLError as exc:
            raise ImageError(f"image {self.uri}: TLS verification failed: {exc}") from exc
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise _Unreachable(f"image {self.uri}: cannot connect: {exc}"
                               f"{self._outage_note()}") from exc
        except requests.RequestException as exc:     # redirect loops, bad URLs, ...
            raise ImageError(f"image {self.shown}: {type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 500:
            resp.close()
            raise _Unreachable(f"image {self.uri}: HTTP {resp.status_code} {resp.reason}"
                               f"{self._outage_note()}")
        expected = 200 if first else 206
        if resp.status_code != expected:
            resp.close()
            raise ImageError(f"image {self.uri}: HTTP {resp.status_code} {resp.reason}, "
                             f"expected {expected}{self._refused(resp.status_code)}")
        if first:
            length = resp.headers.get("Content-Length")
            self.size = int(length) if length and length.isdigit() else None
            self._ranges = resp.headers.get("Accept-Ranges", "").lower() == "bytes"
            self._last_byte = time.monotonic()      # the download has begun: its answer
        else:
            start = resp.headers.get("Content-Range", "").split(" ")[-1].split("-")[0]
            if start != str(self._done):
                resp.close()
                raise ImageError(f"image {self.uri}: asked to resume at byte {self._done}, "
                                 f"server answered Content-Range "
                                 f"{resp.headers.get('Content-Range')!r}")
        self._resp = resp
        self._stall.watch(resp)

    def _outage_note(self):
        if self._last_byte is None or not self._stall.seconds:
            return ""
        return (f" (no answer for {self._outage_seconds():.0f} s after byte {self._done} of "
                f"{self.size}; an outage is waited out for {self._stall.seconds} s: "
                f"--image_stall_seconds)")

    def _refused(self, status):
        if status not in (401, 403):
            return ""
        if "Authorization" in self._session.headers:
            return " (the server refused the image's Authorization header)"
        return " (the server wants credentials the image was not given)"

    def read(self, n):
        return self._retried(lambda: self._read_once(n))

    def readinto(self, view):
        """read() into view: the body goes from the socket straight into the caller's buffer
        (a raw image's aligned blocks), not through a bytes object and a copy."""
        return self._retried(lambda: self._readinto_once(view))

    def _retried(self, once):
        try:
            for attempt in self._retrying():
                with attempt:
                    return once()
        except _Dropped as exc:
            raise ImageError(str(exc)) from exc

    def _read_once(self, n):
        data, why = self._pull(lambda resp: resp.raw.read(n, decode_content=False))
        return data if self._settle(None if data is None else len(data), why) else b""

    def _readinto_once(self, view):
        return self._settle(*self._pull(lambda resp: _body_readinto(resp)(view)))

    def _pull(self, read):
        """read(response) once, reconnecting (with Range) after a drop: (its result, why a
        short one ended) or (None, the error)."""
        if self._resp is None:
            self._connect(first=False)
        try:
            return read(self._resp), "connection closed early"
        except Exception as exc:    # urllib3 and socket errors vary by version: all are a drop
            return None, exc

    def _settle(self, got, why):
        """got: the bytes one read brought (None: it failed, for why). Returns got, or 0 at the
        end of the image; a drop raises _Dropped (retried with Range) or ImageError."""
        if self._stall.stalled:
            self.close()
            raise ImageError(f"image {self.shown}: stalled: fewer than {self._stall.min_bytes} "
                             f"bytes in {self._stall.seconds} s (after {self._done} bytes)")
        self._stall.note(got or 0)
        if got and (self.size is None or self._done + got <= self.size):
            self._done += got
            self._last_byte = time.monotonic()
            return got
        if self.size is None and got is not None:
            return 0                # no length given: a clean close is the end
        if got is not None and self._done >= (self.size or 0):
            return 0
        self._resp.close()
        self._resp = None
        self._stall.pause()         # no connection: the outage deadline judges, not the window
        if not self._ranges:
            raise ImageError(f"image {self.uri}: connection dropped after {self._done} of "
                             f"{self.size} bytes ({why}) and the server does not support "
                             f"Range requests (no 'Accept-Ranges: bytes'), so it cannot resume")
        LOG.warning("image %s: connection dropped after %s bytes (%s); resuming", self.uri,
                    self._done, why)
        raise _Dropped(f"image {self.uri}: connection dropped after {self._done} of "
                       f"{self.size} bytes ({why}); {self._retries} attempts to resume failed")

    def close(self):
        self._stall.stop()
        if self._resp is not None:
            self._resp.close()
        self._session.close()


def _body_readinto(resp):
    """The response body's readinto. urllib3's reads a bytes object and copies it into the
    buffer, and the http.client read under it copies once more; http.client's own readinto,
    under urllib3, reads from the socket into the buffer. Neither decodes (decode_content is
    never asked for), so both give the bytes as sent; a urllib3 without that attribute gets
    its own readinto."""
    body = getattr(resp.raw, "_fp", None)
    readinto = getattr(body, "readinto", None)
    return readinto if callable(readinto) else resp.raw.readinto




BUILTIN = {"file": FileSource, "http": HttpSource, "https": HttpSource}


def _source_class(scheme):
    # Ours without stevedore's scan of every package's entry points (pipeline.py says why).
    if scheme in BUILTIN:
        return BUILTIN[scheme]
    try:
        from stevedore import driver
        return driver.DriverManager(NAMESPACE, scheme, invoke_on_load=False).driver
    except Exception:   # stevedore raises NoMatches or RuntimeError by version
        raise ImageError(f"image URI scheme {scheme!r} is not supported "
                         f"(known: {', '.join(sorted(BUILTIN))})") from None


def open_source(uri, **opts):
    """A reader for uri; opts: tls_verify, ca_bundle, headers, timeout, retries."""
    scheme = urllib.parse.urlparse(uri).scheme.lower() if "://" in uri else "file"
    try:
        return _source_class(scheme)(uri, **opts)
    except _Dropped as exc:
        raise ImageError(str(exc)) from exc
