"""What may be shown of secrets: nothing.

Swift temporary URLs carry their signature in the query string, image servers take credentials
in the URL, Fuel documents carry users' passwords, and a configdrive is the instance's secrets.
Everything provision shows (log records, progress events, error messages, printed plans) passes
through here: URLs lose their user info and query, known secret fields and configdrive contents
are replaced by a marker. Patterns are linear (no nested quantifiers).
"""

import logging
import re
import urllib.parse

MARK = "<redacted>"
# Keys whose values are secret wherever they appear (lower case).
SECRET_KEYS = {"password", "passwd", "plain_text_passwd", "hashed_passwd", "admin_pass",
               "auth_token", "token", "image_auth_token", "secret", "temp_url_sig",
               "content", "user_data", "configdrive", "private_key",
               # an image's Authorization header; Ironic's OCI pull secret and the header
               # Ironic makes of it (instance_info)
               "authorization", "image_pull_secret", "image_request_authorization_secret",
               # an encrypted volume's passphrase (unlock.passphrase, a luks_format step)
               "passphrase"}
# An image's detached signature (Ironic: image_signature): its URL may carry credentials as
# image URLs do, and armour given inline is not shown either.
SIGNATURE_KEYS = {"signature", "image_signature"}
# Values a plug-in marked secret (its secret_fields): replaced wherever they show in text.
_VALUES = set()
# shorter values would replace ordinary words and numbers
MIN_VALUE_CHARS = 4
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,15}://[^\s'\"<>]+")


def url(text):
    """scheme://host[:port]/path, with '?…' where a query was: never user info or a query."""
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError:
        return MARK
    if not parts.scheme or not parts.netloc:
        return text
    host = parts.hostname or ""
    netloc = parts.netloc.rpartition("@")[2]
    if netloc.count(":") > 1 and not netloc.startswith("["):
        # an IPv6 address and port without brackets, as urllib3's own log lines write them
        # ("http://fd00::1:8080 \"GET /x\""): kept whole, not cut to "fd00"
        host = netloc
    elif ":" in host:
        host = f"[{host}]"
    try:
        if parts.port and not host.endswith(f":{parts.port}"):
            host += f":{parts.port}"
    except ValueError:
        pass
    rest = "?…" if parts.query or parts.fragment else ""
    return f"{parts.scheme}://{host}{parts.path}{rest}"


_TOKEN = re.compile(r"\S+")


def _url_match(m):
    # "image https://h/x?sig=...: HTTP 403": the colon ends the sentence, not the URL.
    found = m.group(0)
    cut = len(found.rstrip(".,:;)]"))
    # ...but not the bracket that closes an IPv6 literal (http://[fd00::1]): without it the
    # URL does not parse and was shown as the marker alone
    if found.rfind("[", 0, cut) > found.rfind("]", 0, cut) and found[cut:].startswith("]"):
        cut += 1
    return url(found[:cut]) + found[cut:]


def _path_query(token):
    # "/x.img?sig=..." as urllib3 quotes it ("url: /x.img?sig=..."): the query goes too.
    q = token.find("?")
    if q <= 0 or "/" not in token[:q] or token[q + 1:q + 2] in ("", "…"):
        return token
    return token[:q] + "?…"


def remember(value):
    """A secret value (a string, or the strings in a list or dict) that text() hides from
    now on, wherever it appears: a plug-in's secret field, which may show in a command line,
    an error or a description."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            remember(item)
    elif isinstance(value, str) and len(value) >= MIN_VALUE_CHARS:
        _VALUES.add(value)


def text(message):
    """message with every URL in it shortened by url(), queries after paths cut, and the
    values remember() was given replaced."""
    if not isinstance(message, str):
        return message
    for value in sorted(_VALUES, key=len, reverse=True):
        if value in message:
            message = message.replace(value, MARK)
    if "://" in message:
        message = _URL.sub(_url_match, message)
    if "?" in message:
        message = _TOKEN.sub(lambda m: _path_query(m.group(0)), message)
    return message


def signature(value):
    """A signature as it may be shown: its URL shortened, a local path, or the marker."""
    if "://" in value:
        return url(value.strip())
    return value if value.startswith("/") and "\n" not in value else MARK


def document(value, key=None):
    """A copy of a JSON-like value with secret fields replaced and URLs shortened."""
    if key is not None and str(key).lower() in SIGNATURE_KEYS and isinstance(value, str):
        return signature(value)
    if key is not None and str(key).lower() in SECRET_KEYS and value not in (None, "", {}, []):
        return MARK
    if isinstance(value, dict):
        return {k: document(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [document(v) for v in value]
    if isinstance(value, str):
        return text(value)
    return value


class Formatter(logging.Formatter):
    """Log lines with redact.text() applied to the whole line, tracebacks included."""

    def format(self, record):
        return text(super().format(record))
