"""Ironic's ramdisk API as the ramdisk speaks it: every answer read in bounded memory and
time, since whatever answers on ipa-api-url may send more, or send it slowly, and the
ramdisk's memory is the machine's RAM."""

import requests

from provision_agent import bounded_http, redact

# 1.72: agent_status in heartbeats (1.68: agent_verify_ca; lookup and agent_version are older).
API_VERSION = "1.72"
HEADERS = {"X-OpenStack-Ironic-API-Version": API_VERSION}
HIDDEN_TOKEN = "******"     # what lookup answers once the token went to an earlier lookup
# Ironic's answers to lookup and heartbeat are a node record: kilobytes.
MAX_ANSWER = 1 << 20
ANSWER_SECONDS = 60


class Answer:
    """An HTTP answer, its body read in bounded memory and time (bounded_http)."""

    def __init__(self, status_code, body):
        self.status_code = status_code
        self.text = body.decode(errors="replace")

    def json(self):
        import json
        return json.loads(self.text)


def request(session, method, url, **kwargs):
    headers = dict(kwargs.pop("headers", {}), **bounded_http.NO_ENCODING)
    resp = session.request(method, url, headers=headers, stream=True,
                           hooks=bounded_http.hooks(), **kwargs)
    try:
        return Answer(resp.status_code,
                      bounded_http.read(resp, MAX_ANSWER, ANSWER_SECONDS))
    except bounded_http.BodyError as exc:
        raise requests.RequestException(str(exc)) from None
    finally:
        resp.close()


class AgentError(Exception):
    """A problem a retry will not fix: the message says what to change."""


class NotYet(Exception):
    """Ironic does not (yet) hand this machine a node: retried."""


def reason(resp):
    """Ironic's error message of an answer, redacted and cut short."""
    try:
        text = resp.json().get("error_message") or resp.text
    except ValueError:
        text = resp.text
    return redact.text(str(text))[:300]
