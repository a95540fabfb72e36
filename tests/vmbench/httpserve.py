"""Serve host files to the guest over HTTP: the guest reaches 127.0.0.1 of the host as 10.0.2.2.

    with FileServer(tmpdir) as srv:
        vm.provision(args=["--input_data_url", srv.guest_url("layout.json")])
        assert "/layout.json" in srv.requested
"""

import functools
import http.server
import socket
import threading

GUEST_HOST_ADDRESS = "10.0.2.2"   # qemu user networking's alias for the host's loopback


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        self.server.requested.append(self.path)


class _Server6(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6


class FileServer:
    def __init__(self, directory, address="127.0.0.1", port=0):
        """address: where to listen; loopback (the default) keeps it to this machine and
        the guest's 10.0.2.2, a provisioning network's host address serves that network.
        port: 0 for any free one; a fixed port raises OSError on __enter__ when taken."""
        self.directory = str(directory)
        self.address = address
        self.fixed_port = port
        self.requested = []
        self._server = None
        self._thread = None

    def __enter__(self):
        handler = functools.partial(_Handler, directory=self.directory)
        server = _Server6 if ":" in self.address else http.server.ThreadingHTTPServer
        self._server = server((self.address, self.fixed_port), handler)
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

    def url(self, name=""):
        """The URL on the address it listens on."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}/{name.lstrip('/')}"
