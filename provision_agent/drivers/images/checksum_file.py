"""An image's checksum given as the URL of a checksum file, as Ironic and ironic-python-agent
take it (`image_checksum: http://.../image.qcow2.sha256sum`).

Read in the ramdisk, like IPA, right before the image itself: the ramdisk is where the image
server must be reachable anyway (the conductor need not be), and a file that is updated
along with its image ("latest") is read when the image is. Which entry counts follows
Ironic's and IPA's rules: a file of one line without blanks is the digest itself; otherwise
the entry whose file name is exactly the image URL's basename (`HEX  NAME`, `HEX *NAME` from
sha256sum, or BSD's `SHA256 (NAME) = HEX`), `#` lines ignored. A file is a list of other
files' names too, some of them chosen by whoever named those files: a line is read as
sha256sum -c reads it (GNU's form first, the name to the line's end, blanks and a leading `*`
included), never as a BSD line hidden in a GNU name, and two entries for the image's name
are refused rather than one picked. The algorithm is the one given (instance_info
image_os_hash_algo), a BSD line's own, or follows from the digest's length.

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
_TAG_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPES = {"\\": "\\", "n": "\n", "r": "\r"}


def resolve(url, image_uri, algo=None, *, tls_verify=True, ca_bundle=None, headers=None,
            deadline=DEADLINE):
    """"algo:hex" for image_uri from the checksum file at url. Raises ImageError."""
    text = fetch(url, tls_verify=tls_verify, ca_bundle=ca_bundle, headers=headers,
                 deadline=deadline)
    found_algo, digest = pick(text, image_uri, algo, where=f"checksum file {redact.url(url)}")
    LOG.info("image %s: checksum %s:%s from %s", redact.url(image_uri), found_algo, digest,
             redact.url(url))
    return f"{found_algo}:{digest}"


def fetch(url, *, tls_verify=True, ca_bundle=None, headers=None, deadline=DEADLINE,
          what="checksum file", limit=None, text=True):
    """The checksum file's text (or, text=False, the bytes of another small side file of an
    image, a signature: `what` names it in errors, `limit` bounds it)."""
    import requests  # only an image with a checksum URL needs it here
    shown = f"{what} {redact.url(url)}"
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
                body, why = _get(session, url, left, ca_bundle or tls_verify, shown, limit,
                                 what)
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
                return _text(body, shown) if text else body
    finally:
        session.close()
    raise ImageError(f"{shown}: cannot be read ({why or 'no time left'}; gave up after "
                     f"{deadline} s)")


def _get(session, url, seconds, verify, shown, limit=None, what="checksum file"):
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
            return bounded_http.read(resp, limit or MAX_BYTES, round(seconds, 1)), None
        except bounded_http.BodyBroken as exc:
            return None, str(exc)
        except bounded_http.BodyError as exc:
            if time.monotonic() - began >= seconds:
                raise ImageError(f"{shown}: not read whole when its time ran out ({exc})") \
                    from None
            raise ImageError(f"{shown}: {exc}; that is not a {what}") from None


def _text(body, shown):
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ImageError(f"{shown}: not text (UTF-8)") from None


def pick(text, image_uri, algo=None, where="checksum file"):
    """(algo, hex) of image_uri's entry in a checksum file's text: the one line whose file
    name is exactly the URL's file name; none, or more than one, is an ImageError."""
    name = os.path.basename(urllib.parse.urlsplit(image_uri).path)
    return find(text, name, algo, where)


def find(text, name, algo=None, where="checksum file"):
    """(algo, hex) of the entry for the file called name (see pick)."""
    # lines end at \n only (a \r before it goes too): str.splitlines() would also break a
    # name at \x85 or \u2028, where sha256sum -c sees one line
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise ImageError(f"{where} is empty")
    if len(lines) == 1 and len(lines[0].split()) == 1:
        return _digest(lines[0].strip(), algo, where)
    names, found = [], []
    for line in lines:
        if line.lstrip().startswith("#"):
            continue
        entry = _entry(line)
        if entry is None:
            continue
        if entry[0] == name:
            found.append(entry)
        else:
            names.append(entry[0])
    if len(found) > 1:
        raise ImageError(f"{where} has {len(found)} entries for {name!r}, the image URL's file "
                         "name: which one counts is not clear (give one entry per file)")
    if found:
        _, digest, tag = found[0]
        return _digest(digest, _tagged(tag, algo, where), where)
    listed = ", ".join(repr(n[:64]) for n in names[:_SHOWN_NAMES])
    more = f" and {len(names) - _SHOWN_NAMES} more" if len(names) > _SHOWN_NAMES else ""
    raise ImageError(f"{where} has no entry for {name!r}, the image URL's file name "
                     f"(it lists {listed + more or 'no file names'})")


def _entry(line):
    """(file name, digest, BSD algorithm tag or None) of a line, else None. GNU's form comes
    first: `HEX  NAME` or `HEX *NAME` (`*`: read in binary mode), the name everything after
    those two characters, blanks included, as sha256sum -c takes it. Only a line that is not
    GNU's and starts `ALGO (` is BSD's (`ALGO (NAME) = HEX`, the name up to the last `) = `,
    HEX all hex digits): a GNU file's name that holds ` (NAME) = HEX` names no other file. A
    line starting with a backslash has its name escaped (`\\\\`, `\\n`, `\\r`), as
    coreutils writes it."""
    text = line.lstrip(" \t")
    escaped = text.startswith("\\")
    if escaped:
        text = text[1:]
    digest, sep, rest = text.partition(" ")
    if sep and digest and rest[:1] in (" ", "*"):
        named, tag = rest[1:], None
    else:
        tag, sep, rest = text.partition(" (")
        if not sep or not tag or any(c not in _TAG_CHARS for c in tag):
            return None
        named, sep, digest = rest.rpartition(") = ")
        digest = digest.rstrip(" \t")
        if not sep or not digest or any(c not in _HEX for c in digest):
            return None
    if escaped:
        named = _unescape(named)
    if not named:
        return None
    return named, digest, tag


def _unescape(name):
    """A name as coreutils escapes it (`\\\\` for a backslash, `\\n`, `\\r`); None for any
    other escape."""
    out, chars = [], iter(name)
    for c in chars:
        if c == "\\":
            c = _ESCAPES.get(next(chars, ""))
            if c is None:
                return None
        out.append(c)
    return "".join(out)


def _tagged(tag, algo, where):
    """The algorithm of an entry: a BSD line names its own, which must be one of ours and
    agree with the one given."""
    if tag is None:
        return algo
    named = tag.lower()
    if named not in ALGORITHMS:
        raise ImageError(f"{where}: the entry is a {tag[:16]!r} digest; only "
                         f"{', '.join(a.upper() for a in ALGORITHMS)} are taken")
    if algo and algo != named:
        raise ImageError(f"{where}: the entry is a {tag} digest, not the {algo} given "
                         "(image_os_hash_algo)")
    return named


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

