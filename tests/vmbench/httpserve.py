"""Serve host files to the guest over HTTP: the guest reaches 127.0.0.1 of the host as 10.0.2.2.

    with FileServer(tmpdir) as srv:
        vm.provision(args=["--input_data_url", srv.guest_url("layout.json")])
        assert "/layout.json" in srv.requested
"""

import functools
import http.server
import threading

GUEST_HOST_ADDRESS = "10.0.2.2"   # qemu user networking's alias for the host's loopback


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        self.server.requested.append(self.path)


class FileServer:
    def __init__(self, directory):
        self.directory = str(directory)
        self.requested = []
        self._server = None
        self._thread = None

    def __enter__(self):
        handler = functools.partial(_Handler, directory=self.directory)
        # Bound to loopback only: nothing outside this machine can fetch from it.
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.requested = self.requested
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        return False

    @property
    def port(self):
        return self._server.server_address[1]

    def guest_url(self, name=""):
        return f"http://{GUEST_HOST_ADDRESS}:{self.port}/{name.lstrip('/')}"
