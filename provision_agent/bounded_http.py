"""Reading an HTTP body whose size the server decides, in bounded memory and time.

requests undoes a gzip Content-Encoding by itself, and urllib3 1.26 (Debian bookworm's, the
one the ramdisk carries) inflates all of one read at once: `raw.read(n, decode_content=True)`
made 3 GiB of 3 MB on the wire (MemoryError), and reading in 64 KiB pieces did the same with
two encodings stacked ("gzip, gzip", 5 KB on the wire). requests also reads the whole body of
each redirect it follows, inflated, under every urllib3. So: ask for no encoding, read the
wire bytes, inflate gzip/deflate here with the limit on what comes out, and close a redirect
before requests reads its body. Needs nothing but the standard library (requests' response
objects are used as they come), so the ramdisk's interpreter can run it alone in tests.
"""

import socket
import threading
import time
import zlib

NO_ENCODING = {"Accept-Encoding": "identity"}
CHUNK = 64 << 10
_INFLATE = ("gzip", "x-gzip", "deflate")
_SHOWN = 40         # of a header value: the server chose it


class BodyError(Exception):
    """Too large, too slow, or in an encoding that is not read."""


class BodyBroken(BodyError):
    """The connection failed mid-body (worth a retry, unlike the others)."""


def skip_redirect_body(resp, *_args, **_kwargs):
    """requests response hook: a redirect's connection is closed, so requests' read of its
    body ("so the connection can be released") finds nothing to read."""
    if resp.is_redirect:
        resp.raw.close()
    return resp


def hooks():
    return {"response": [skip_redirect_body]}


def read(resp, limit, seconds):
    """The body of a stream=True response, at most `limit` bytes once decoded, read within
    `seconds`. Raises BodyError.

    One read of CHUNK bytes keeps going while a byte arrives within each receive's timeout, so
    the clock between reads is not enough against a server that drips: at the deadline a
    timer shuts the response's socket down, and the read in progress fails."""
    inflate = _inflater(resp.headers.get("Content-Encoding", ""))
    end = time.monotonic() + seconds
    cut = threading.Timer(seconds, shutdown, [resp])
    cut.daemon = True
    cut.start()
    try:
        return _read(resp, limit, seconds, end, inflate)
    finally:
        cut.cancel()


def _read(resp, limit, seconds, end, inflate):
    out = bytearray()
    while True:
        try:
            data = resp.raw.read(CHUNK, decode_content=False)
        except Exception as exc:    # urllib3's and socket errors differ by version
            if time.monotonic() >= end:
                raise BodyError(f"the answer took longer than {seconds} s") from None
            raise BodyBroken(f"the connection failed after {len(out)} bytes "
                             f"({type(exc).__name__})") from None
        if not data:
            break
        if inflate is None:
            out += data
        else:
            inflate.feed(data, out, limit)
        if len(out) > limit:
            raise BodyError(f"the answer is larger than {limit} bytes"
                            + (" once inflated" if inflate else ""))
        if time.monotonic() > end:
            raise BodyError(f"the answer took longer than {seconds} s")
    if inflate is not None:
        inflate.finish()
    return bytes(out)


def shutdown(resp):
    """Shuts a response's socket down, so that a read blocked on it fails at once."""
    # The connection's socket; a connection that will close has handed it to the response's
    # file object (http.client), so look there too.
    conn = getattr(getattr(resp.raw, "connection", None), "sock", None)
    fp = getattr(getattr(getattr(resp.raw, "_fp", None), "fp", None), "raw", None)
    for sock in (conn, getattr(fp, "_sock", None)):
        try:
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _inflater(header):
    codings = [c.strip().lower() for c in header.split(",")]
    codings = [c for c in codings if c not in ("", "identity")]
    if not codings:
        return None
    if len(codings) == 1 and codings[0] in _INFLATE:
        return _Inflate()
    raise BodyError(f"the server sent Content-Encoding {header[:_SHOWN]!r}, which is not read "
                    f"(provision asks for none)")


class _Inflate:
    """gzip (one or more members) or zlib-wrapped deflate, at most CHUNK bytes per step."""

    def __init__(self):
        self._z = zlib.decompressobj(32 + zlib.MAX_WBITS)    # a gzip or a zlib header
        self._open = False      # a member has begun and not ended

    def feed(self, data, out, limit):
        """Inflate data into out, stopping once out holds more than limit bytes."""
        try:
            while len(out) <= limit:
                self._open = self._open or bool(data)
                got = self._z.decompress(data, CHUNK)
                out += got
                if self._z.eof:
                    data, self._open = self._z.unused_data, False
                    self._z = zlib.decompressobj(32 + zlib.MAX_WBITS)
                    if not data:
                        return
                    continue
                data = self._z.unconsumed_tail
                # a full CHUNK out may leave more inflated output pending without input left
                if not data and len(got) < CHUNK:
                    return
        except zlib.error:
            raise BodyError("the answer's gzip/deflate encoding is corrupt") from None

    def finish(self):
        if self._open:
            raise BodyError("the answer's gzip/deflate encoding ends early")


def reason(exc):
    """urllib3's text names pools and objects; keep the part a person can act on."""
    text = str(exc)
    for marker, plain in (("Connection refused", "connection refused"),
                          ("Name or service not known", "host name not found"),
                          ("Temporary failure in name resolution", "host name not found"),
                          ("timed out", "timed out"), ("No route to host", "no route to host"),
                          ("Network is unreachable", "network unreachable"),
                          ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed")):
        if marker in text:
            return plain
    return type(exc).__name__
