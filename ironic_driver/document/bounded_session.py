"""A requests session for Ironic's own HTTP clients (its OCI registry client) that cannot
hold the conductor longer, or read more, than it is told.

Per-request timeouts bound each receive, not an exchange: a server that drips a byte a
second keeps a read alive indefinitely, and a registry's tag list may send "next" pages
forever. So one deadline covers everything the session does: at that moment a timer shuts
down every socket the session opened (a blocked read returns at once, the way
provision_agent's StallWatch ends a stalled image download), and later requests are refused.
Each answer is read here, at most `max_answer` bytes once inflated (bounded_http), and a
redirect's body is never read. Connections made through a proxy (a ProxyManager) are not
tracked: the timeouts, each cut to the time left, still apply to them.

`gate`, when given, sees every request right before it is sent (requests' own redirects
included) and may take headers off it: oci_secret.Policy keeps the Authorization header
from hosts the pull secret is not for.
"""

import socket
import threading
import time
import weakref

import requests
from urllib3 import connection, connectionpool

from provision_agent import bounded_http

SLACK = 0.1     # seconds


class Overdue(Exception):
    """The session's deadline passed."""


class BoundedSession(requests.Session):
    def __init__(self, like, deadline, max_answer, max_redirects, gate=None):
        """like: the session the client made (its TLS verification and adapters are kept: a CA
        it was given is used even when the environment names another bundle)."""
        super().__init__()
        self.gate = gate
        self.deadline, self.max_answer = deadline, max_answer
        self.expired = False
        self._sockets = weakref.WeakSet()
        self.verify = like.verify
        for prefix, adapter in like.adapters.items():   # Ironic's TLS settings
            adapter.poolmanager.pool_classes_by_scheme = _tracking_pools(self)
            self.mount(prefix, adapter)
        self.max_redirects = max_redirects
        self.headers.update(bounded_http.NO_ENCODING)
        self.hooks["response"].append(bounded_http.skip_redirect_body)
        self._end = time.monotonic() + deadline
        self._timer = threading.Timer(deadline, self._cut)
        self._timer.daemon = True
        self._timer.start()

    def request(self, method, url, **kwargs):
        left = self._end - time.monotonic()
        if self.expired or left <= 0:
            raise Overdue(f"did not answer within {self.deadline} s")
        timeout = kwargs.get("timeout") or left
        kwargs["timeout"] = tuple(min(t, left) for t in timeout) \
            if isinstance(timeout, tuple) else min(timeout, left)
        if kwargs.get("verify") is None:
            # requests takes REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE from the environment over the
            # session's own verify when a request names none (Ironic's client names none):
            # the CA Ironic set ([oci]verify_ca) must win. `True` still takes the environment's.
            kwargs["verify"] = self.verify
        streamed = kwargs.get("stream")
        kwargs["stream"] = True
        resp = super().request(method, url, **kwargs)
        if not streamed:
            body = bounded_http.read(resp, self.max_answer,
                                     max(0.1, self._end - time.monotonic()))
            resp._content, resp._content_consumed = body, True    # what .text/.json() read
            resp.close()
        return resp

    def send(self, request, **kwargs):
        # Session.request and requests' redirects both come here with the final headers.
        if self.gate:
            self.gate(request)
        return super().send(request, **kwargs)

    def spent(self):
        """Whether the deadline has come: a failure now is the deadline's (a timeout cut to
        the last moments may fire just before the timer does)."""
        return self.expired or time.monotonic() >= self._end - SLACK

    def track(self, sock):
        if self.expired:
            _shut(sock)
        self._sockets.add(sock)

    def close(self):
        self._timer.cancel()
        super().close()

    def _cut(self):
        self.expired = True
        for sock in list(self._sockets):
            _shut(sock)


def _shut(sock):
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _tracking_pools(session):
    """urllib3 pool classes whose connections hand their sockets to session.track."""
    def tracked(base):
        class Tracked(base):
            def _new_conn(self):
                sock = super()._new_conn()
                session.track(sock)
                return sock

            def connect(self):
                super().connect()
                # With TLS, the socket _new_conn made is detached by the wrap (shutting it
                # down then does nothing): the wrapped one is what a blocked read waits on. A
                # registry dripping its headers over TLS held the conductor past the deadline.
                session.track(self.sock)
        return Tracked
    return {"http": type("TrackedPool", (connectionpool.HTTPConnectionPool,),
                         {"ConnectionCls": tracked(connection.HTTPConnection)}),
            "https": type("TrackedTLSPool", (connectionpool.HTTPSConnectionPool,),
                          {"ConnectionCls": tracked(connection.HTTPSConnection)})}
