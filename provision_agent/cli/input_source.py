"""Fetching the input document from --input_data_url.

A provisioning network drops and refuses connections while switches and servers come up, so
transient failures are retried (as image downloads are); what still fails is reported as a
fetch failure (its own exit code), not as invalid input: the document was never seen.
"""

import logging

from provision_agent import bounded_http, redact
from provision_agent.errors import InputError, InputUnreachable, Problem
from provision_agent.plan import json_text, urls

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
    import tenacity  # only for a URL: a file input never pays for it (it imports asyncio)
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
    # here: a file input never pays requests' start-up (benchmarks/layouts_vs_shell.md)
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
        raise InputUnreachable(redact.url(url),
                               f"TLS verification failed ({bounded_http.reason(exc)}); give "
                               "the CA with --input_data_ca_bundle") from None
    except (requests.ConnectionError, requests.Timeout) as exc:
        LOG.info("fetching the input from %s: %s; retrying", redact.url(url),
                 bounded_http.reason(exc))
        raise _Transient(bounded_http.reason(exc)) from None
    except requests.RequestException as exc:
        raise InputUnreachable(redact.url(url), bounded_http.reason(exc)) from None
    return body


def read_input(path=None, url=None, *, ca_bundle=None, insecure=False, yaml=False):
    """The parsed document: YAML when yaml (a data driver whose format is YAML) or the file's
    or URL's name ends in .yaml/.yml, else JSON."""
    if bool(path) == bool(url):
        raise InputError([Problem("options", "give exactly one of --input_data_file and "
                                             "--input_data_url")])
    if url and urls.host_problem(url):
        # refused before any attempt: retried, a typo in the literal was a fetch failure
        # (exit 6) shown as "<redacted>", the URL no longer parsing
        raise InputError([Problem("--input_data_url", urls.host_problem(url))])
    where = path or redact.url(url)
    if path:
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_BYTES + 1)
            if len(raw) > MAX_BYTES:
                raise InputError([Problem(where, f"larger than {MAX_BYTES} bytes; "
                                                 "that is not an input document")])
        except OSError as exc:
            raise InputError([Problem(where, f"cannot read input: {exc.strerror or exc}")])
    else:
        raw = fetch(url, ca_bundle=ca_bundle, insecure=insecure)
    from provision_agent.plan import yaml_text
    name = (path or url.split("?")[0]).lower()
    if yaml or name.endswith(yaml_text.SUFFIXES):
        return yaml_text.parse_document(raw, where)
    return json_text.parse_document(raw, where)
