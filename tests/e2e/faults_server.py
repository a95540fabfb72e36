"""An image server for the fault cases (tests/e2e/test_faults_power.py): one directory over
HTTP with Range (so a download resumes), at most `rate` bytes a second (so a fault lands
mid-download), that can go away for a while and come back on the same port, as a server or
the network to it does.

    srv = ImageServer(directory, rate=4 << 20).start()
    srv.guest_url("root.img"); srv.stop(); srv.start(); srv.requests  # [(path, Range), ...]
"""

import http.server
import os
import socket
import threading
import time

from tests.vmbench.httpserve import GUEST_HOST_ADDRESS

CHUNK = 64 << 10


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server.owner
        srv.requests.append((self.path, self.headers.get("Range")))
        path = os.path.join(srv.directory, os.path.basename(self.path))
        if not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        size = os.path.getsize(path)
        start = 0
        if self.headers.get("Range", "").startswith("bytes="):
            start = int(self.headers["Range"][6:].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        else:
            self.send_response(200)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(size - start))
        self.end_headers()
        srv.connections.add(self.connection)
        try:
            self._send(path, start, srv.rate)
        except OSError:
            pass            # the server went away under it, or the client did
        finally:
            srv.connections.discard(self.connection)

    def _send(self, path, start, rate):
        with open(path, "rb") as f:
            f.seek(start)
            while chunk := f.read(CHUNK):
                self.wfile.write(chunk)
                if rate:
                    time.sleep(len(chunk) / rate)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False


class ImageServer:
    def __init__(self, directory, rate=None):
        self.directory, self.rate = str(directory), rate
        self.port = 0
        self.requests = []
        self.connections = set()
        self._server = None

    def start(self):
        self._server = _Server(("127.0.0.1", self.port), _Handler)
        self._server.owner = self
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        """Gone: no more connections taken, and those open cut."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server = None
        for conn in list(self.connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def guest_url(self, name):
        return f"http://{GUEST_HOST_ADDRESS}:{self.port}/{name}"
