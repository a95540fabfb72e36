"""A Tang server on the host for the VMs (they reach it as 10.0.2.2): Debian's tangd, which
answers one HTTP request on stdin/stdout as systemd's socket activation runs it, behind a
listener of ours on a free loopback port.

    with TangServer(keydir) as tang:      # keys made in keydir when it has none
        tang.guest_url, tang.thumbprint   # what a layout's unlock.tang entry names
    # leaving the block stops the server: a disk bound to it no longer unlocks
"""

import json
import socket
import subprocess
import threading
from pathlib import Path

from tests.vmbench.httpserve import GUEST_HOST_ADDRESS

TANGD = "/usr/libexec/tangd"
KEYGEN = "/usr/libexec/tangd-keygen"


class TangServer:
    def __init__(self, keydir, port=0, address="127.0.0.1"):
        """port: 0 for a free one; the port of a server stopped before, to start it again
        where the disks bound to it will look. address: loopback for qemu's user network
        (guest_url), a lab bridge's host address for machines on that bridge (url)."""
        self.keydir = Path(keydir)
        self.fixed_port = port
        self.address = address
        self._sock = None
        self._thread = None
        self.requests = 0

    @property
    def thumbprint(self):
        """The S256 thumbprint of the signing key (tangd-keygen names each key file by it)."""
        for jwk in sorted(self.keydir.glob("*.jwk")):
            if "verify" in json.loads(jwk.read_text()).get("key_ops", []):
                return jwk.stem
        raise RuntimeError(f"no signing key in {self.keydir}")

    @property
    def port(self):
        return self._sock.getsockname()[1]

    @property
    def url(self):
        return f"http://{self.address}:{self.port}"

    @property
    def guest_url(self):
        return f"http://{GUEST_HOST_ADDRESS}:{self.port}"

    def __enter__(self):
        self.keydir.mkdir(parents=True, exist_ok=True)
        if not list(self.keydir.glob("*.jwk")):
            subprocess.run([KEYGEN, str(self.keydir)], check=True, capture_output=True)
        self._sock = socket.create_server((self.address, self.fixed_port))
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return self

    def _serve(self):
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return              # closed: stopped
            with conn:
                self.requests += 1
                subprocess.run([TANGD, str(self.keydir)], stdin=conn, stdout=conn,
                               stderr=subprocess.DEVNULL, timeout=30, check=False)

    def __exit__(self, *exc):
        # close() alone leaves the port listening while accept() waits in the other thread
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._thread.join(timeout=35)
        return False
