"""An image's checksum given as the URL of a checksum file, as Ironic and ironic-python-agent
take it (`image_checksum: http://.../image.qcow2.sha256sum`).

Read in the ramdisk, like IPA, right before the image itself: the ramdisk is where the image
server must be reachable anyway (the conductor need not be), and a file that is updated
along with its image ("latest") is read when the image is. Which entry counts follows
Ironic's and IPA's rules: a file of one line without blanks is the digest itself; otherwise
the entry whose file name is the image URL's basename (`HEX  NAME`, `HEX *NAME` from
sha256sum, or BSD's `SHA256 (NAME) = HEX`), `#` lines ignored. The algorithm is the one given
(instance_info image_os_hash_algo) or follows from the digest's length.

The download is bounded: at most MAX_BYTES, DEADLINE seconds for everything (retries
included; a body still dripping in at the deadline is cut), MAX_REDIRECTS redirects whose
bodies are never read.
"""

import logging
import os
import time
import urllib.parse

from provision_agent import bounded_http, redact
from provision_agent.drivers.images.checksums import ALGORITHMS
from provision_agent.errors import ImageError

LOG = logging.getLogger(__name__)

# CentOS's and Ubuntu's SHA256SUMS are a few KiB; a file this large is not a checksum list.
MAX_BYTES = 1 << 20
DEADLINE = 120
CONNECT_TIMEOUT = 15
MAX_REDIRECTS = 5
ATTEMPTS = 3
_TRANSIENT = {408, 429, 500, 502, 503, 504}
_LENGTHS = {n: algo for algo, n in ALGORITHMS.items()}
_SHOWN_NAMES = 5


def resolve(url, image_uri, algo=None, *, tls_verify=True, ca_bundle=None, headers=None,
            deadline=DEADLINE):
    """"algo:hex" for image_uri from the checksum file at url. Raises ImageError."""
    text = fetch(url, tls_verify=tls_verify, ca_bundle=ca_bundle, headers=headers,
                 deadline=deadline)
    found_algo, digest = pick(text, image_uri, algo, where=f"checksum file {redact.url(url)}")
    LOG.info("image %s: checksum %s:%s from %s", redact.url(image_uri), found_algo, digest,
             redact.url(url))
    return f"{found_algo}:{digest}"


def fetch(url, *, tls_verify=True, ca_bundle=None, headers=None, deadline=DEADLINE):
    """The checksum file's text."""
    shown = f"checksum file {redact.url(url)}"
    return _text(fetch_bytes(url, shown, MAX_BYTES, "a checksum file", tls_verify=tls_verify,
                             ca_bundle=ca_bundle, headers=headers, deadline=deadline), shown)


def fetch_bytes(url, shown, max_bytes, kind, *, tls_verify=True, ca_bundle=None,
                headers=None, deadline=DEADLINE):
    """A small file's bytes over http(s), bounded as above; shown: how errors name it, kind:
    what it should be ("a key file")."""
    import requests  # only an image with a checksum URL needs it here
    end = time.monotonic() + deadline
    session = requests.Session()
    session.max_redirects = MAX_REDIRECTS
    session.headers.update(headers or {})
    session.headers.update(bounded_http.NO_ENCODING)
    session.hooks.update(bounded_http.hooks())
    why = None
    try:
        for attempt in range(ATTEMPTS):
            left = end - time.monotonic()
            if left <= 0:
                break
            if attempt:
                LOG.info("%s: %s; trying again", shown, why)
                time.sleep(min(2 ** attempt, left / 2))
                left = end - time.monotonic()
            try:
                body, why = _get(session, url, left, ca_bundle or tls_verify, shown,
                                 (max_bytes, kind))
            except requests.exceptions.SSLError:
                raise ImageError(f"{shown}: TLS verification failed (give the CA with "
                                 "--image_ca_bundle)") from None
            except requests.exceptions.TooManyRedirects:
                raise ImageError(f"{shown}: more than {MAX_REDIRECTS} redirects") from None
            except (requests.ConnectionError, requests.Timeout) as exc:
                body, why = None, bounded_http.reason(exc)
            except requests.RequestException as exc:
                raise ImageError(f"{shown}: {type(exc).__name__}") from None
            if body is not None:
                return body
    finally:
        session.close()
    raise ImageError(f"{shown}: cannot be read ({why or 'no time left'}; gave up after "
                     f"{deadline} s)")


def _get(session, url, seconds, verify, shown, limit):
    """(body, None), or (None, why) for a failure worth another attempt."""
    timeout = (min(CONNECT_TIMEOUT, seconds), seconds)
    began = time.monotonic()
    with session.get(url, stream=True, timeout=timeout, verify=verify) as resp:
        if resp.status_code in _TRANSIENT:
            return None, f"HTTP {resp.status_code}"
        if resp.status_code != 200:
            raise ImageError(f"{shown}: HTTP {resp.status_code} {resp.reason}, expected 200")
        try:
            # cut at the deadline even while a server drips it in (bounded_http.read)
            return bounded_http.read(resp, limit[0], round(seconds, 1)), None
        except bounded_http.BodyBroken as exc:
            return None, str(exc)
        except bounded_http.BodyError as exc:
            if time.monotonic() - began >= seconds:
                raise ImageError(f"{shown}: not read whole when its time ran out ({exc})") \
                    from None
            raise ImageError(f"{shown}: {exc}; that is not {limit[1]}") from None


def _text(body, shown):
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ImageError(f"{shown}: not text (UTF-8)") from None


def pick(text, image_uri, algo=None, where="checksum file"):
    """(algo, hex) of image_uri's entry in a checksum file's text."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise ImageError(f"{where} is empty")
    if len(lines) == 1 and len(lines[0].split()) == 1:
        return _digest(lines[0], algo, where)
    name = os.path.basename(urllib.parse.urlsplit(image_uri).path)
    names = []
    for line in lines:
        if line.startswith("#"):
            continue
        entry = _entry(line)
        if entry is None:
            continue
        named, digest = entry
        if named == name:
            return _digest(digest, algo, where)
        names.append(named)
    listed = ", ".join(repr(n[:64]) for n in names[:_SHOWN_NAMES])
    more = f" and {len(names) - _SHOWN_NAMES} more" if len(names) > _SHOWN_NAMES else ""
    raise ImageError(f"{where} has no entry for {name!r}, the image URL's file name "
                     f"(it lists {listed + more or 'no file names'})")


def _entry(line):
    """(file name, digest) of a GNU (`HEX  NAME`, `HEX *NAME`) or BSD (`ALGO (NAME) = HEX`)
    line, else None."""
    head, sep, digest = line.rpartition(" = ")
    if sep and head.endswith(")") and " (" in head:
        return head.split(" (", 1)[1][:-1], digest.strip()
    parts = line.split(None, 1)
    if len(parts) != 2:
        return None
    # sha256sum writes '*' before the name of a file it read in binary mode
    return parts[1].strip().lstrip("*"), parts[0]


def _digest(value, algo, where):
    value = value.lower()
    if any(c not in "0123456789abcdef" for c in value):
        raise ImageError(f"{where}: the entry's digest is not hexadecimal")
    if algo:
        if len(value) != ALGORITHMS.get(algo, -1):
            raise ImageError(f"{where}: the entry's digest has {len(value)} hex digits, not "
                             f"the {ALGORITHMS.get(algo)} of a {algo} digest (image_os_hash_algo)")
        return algo, value
    found = _LENGTHS.get(len(value))
    if not found:
        raise ImageError(f"{where}: a digest of {len(value)} hex digits is not md5 (32), "
                         "sha256 (64) or sha512 (128)")
    return found, value

