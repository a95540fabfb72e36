"""Fetching the input document from --input_data_url.

A provisioning network drops and refuses connections while switches and servers come up, so
transient failures are retried (as image downloads are); what still fails is reported as a
fetch failure (its own exit code), not as invalid input: the document was never seen.
"""

import logging

from provision_agent import bounded_http, redact
from provision_agent.errors import InputUnreachable

LOG = logging.getLogger(__name__)

ATTEMPTS = 4
# Documents are kilobytes, but Ironic's may carry a configdrive inline (gzip+base64, up to the
# schema's 96 MB); anything larger is not an input document.
MAX_BYTES = 128 << 20
# 128 MiB at 1 MB/s with room to spare; a server dripping bytes is cut here
DEADLINE = 300
_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


class _Transient(Exception):
    pass


def fetch(url, *, ca_bundle=None, insecure=False, timeout=(15, 60), attempts=ATTEMPTS,
          wait=None):
    """The document's bytes. Raises InputUnreachable naming the URL (redacted) and the reason."""
    import tenacity     # only for a URL: a file input never pays for it (it imports asyncio)
    wait = wait or tenacity.wait_exponential(multiplier=1, max=8)
    verify = False if insecure else (ca_bundle or True)
    retrying = tenacity.Retrying(stop=tenacity.stop_after_attempt(attempts), wait=wait,
                                 retry=tenacity.retry_if_exception_type(_Transient),
                                 reraise=True)
    try:
        for attempt in retrying:
            with attempt:
                return _get(url, verify, timeout)
    except _Transient as exc:
        raise InputUnreachable(redact.url(url), f"{exc} (gave up after {attempts} attempts)") \
            from None


def _get(url, verify, timeout):
    # imported here: a file input (the usual case) never pays requests' start-up in the
    # ramdisk, about 1.5 s under TCG
    import requests
    try:
        with requests.get(url, timeout=timeout, verify=verify, stream=True,
                          headers=bounded_http.NO_ENCODING, hooks=bounded_http.hooks()) as resp:
            if resp.status_code in _RETRY_STATUS:
                raise _Transient(f"HTTP {resp.status_code} {resp.reason}")
            if resp.status_code >= 400:
                raise InputUnreachable(redact.url(url), f"HTTP {resp.status_code} {resp.reason}")
            body = bounded_http.read(resp, MAX_BYTES, DEADLINE)
    except bounded_http.BodyBroken as exc:
        LOG.info("fetching the input from %s: %s; retrying", redact.url(url), exc)
        raise _Transient(str(exc)) from None
    except bounded_http.BodyError as exc:
        raise InputUnreachable(redact.url(url), f"{exc}; that is not an input document") \
            from None
    except requests.exceptions.SSLError as exc:
        raise InputUnreachable(redact.url(url), f"TLS verification failed ({reason(exc)}); give "
                                           "the CA with --input_data_ca_bundle") from None
    except (requests.ConnectionError, requests.Timeout) as exc:
        LOG.info("fetching the input from %s: %s; retrying", redact.url(url), reason(exc))
        raise _Transient(reason(exc)) from None
    except requests.RequestException as exc:
        raise InputUnreachable(redact.url(url), reason(exc)) from None
    return body


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
