"""A scripted HTTP session for the ramdisk agent's tests: answers as requests' streamed
responses do, as far as provision_agent.bounded_http reads them."""

import io
import json


class Resp:
    def __init__(self, status, body=None, raw_body=None):
        self.status_code = status
        data = raw_body if raw_body is not None else json.dumps(body or {}).encode()
        self.raw = _Raw(data)
        self.headers = {}
        self.is_redirect = False

    def close(self):
        pass


class _Raw(io.BytesIO):
    def read(self, size=-1, decode_content=None):
        return super().read(size)


class Session:
    """Answers requests from a script; records what was sent."""

    def __init__(self, script):
        self.script = list(script)
        self.sent = []

    def request(self, method, url, **kwargs):
        self.sent.append((method, url, kwargs))
        return self.script.pop(0)
