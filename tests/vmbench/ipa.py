"""The ironic-python-agent (IPA) ramdisk in the VM bench, for the head-to-head with ours.

    rd = ensure_ipa_ramdisk()                       # ramdisk/build-ipa.sh, cached
    with RamdiskAPI() as api, IpaVM(rd, api.guest_url, disks=1) as vm:
        lookup = api.wait_for("GET", "/v1/lookup", vm)     # Request(at, method, path, ...)
        print(lookup.at - vm.started_at)                  # qemu start -> first lookup

`RamdiskAPI` stands in for Ironic's ramdisk API on the host (the guest reaches it as 10.0.2.2):
it answers `GET /` with Ironic 39's version, `GET /v1/lookup` with a node and an agent token,
accepts heartbeats, and records every request with the time it arrived. Either ramdisk talks to
it: IPA's agent, and ours' provision-ironic-agent when booted with `ipa-api-url`.
"""

import http.server
import json
import os
import subprocess
import threading
import time
import uuid as uuidlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tests.vmbench.httpserve import GUEST_HOST_ADDRESS
from tests.vmbench.ramdisk import REPO_ROOT, Ramdisk, RamdiskBuildError
from tests.vmbench.vm import VM, VMError

IRONIC_API_VERSION = "1.115"      # Ironic 39's newest microversion


class IpaRamdisk(Ramdisk):
    """Its kernel, initramfs and manifest.json; no sshd, so no host key."""

    @property
    def host_public_key(self):
        return None


def ensure_ipa_ramdisk():
    """Build the IPA ramdisk or reuse the cached one (root); IPA_RAMDISK_DIR names a prebuilt
    one."""
    prebuilt = os.environ.get("IPA_RAMDISK_DIR")
    if prebuilt:
        return IpaRamdisk(Path(prebuilt))
    argv = ["bash", str(REPO_ROOT / "ramdisk" / "build-ipa.sh")]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RamdiskBuildError(
            f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    for line in proc.stderr.splitlines():
        if line.startswith("ipa-ramdisk:"):
            print(line)
    return IpaRamdisk(Path(proc.stdout.strip().splitlines()[-1]))


@dataclass(frozen=True)
class Request:
    at: float                 # time.monotonic() when it arrived
    method: str
    path: str
    query: dict
    headers: dict
    body: object = field(default=None)


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def _record(self, method):
        at = time.monotonic()
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        req = Request(at, method, url.path, parse_qs(url.query), dict(self.headers), body)
        self.server.api._add(req)
        return req

    def _answer(self, status, doc=None):
        data = json.dumps(doc).encode() if doc is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-OpenStack-Ironic-API-Version", IRONIC_API_VERSION)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        req = self._record("GET")
        api = self.server.api
        if req.path in ("/", ""):
            self._answer(200, {"name": "OpenStack Ironic API", "default_version": {
                "id": "v1", "version": IRONIC_API_VERSION, "min_version": "1.1",
                "status": "CURRENT"}})
        elif req.path == "/v1/lookup" and api.node_uuid:
            # Ironic hands the token out at the first lookup only; later ones get "******".
            token = api.token if api.token_handed_out is None else "******"
            if api.token_handed_out is None:
                api.token_handed_out = req.at
            self._answer(200, {
                "node": {"uuid": api.node_uuid, "properties": {}, "instance_info": {},
                         "driver_internal_info": {}, "provision_state": "deploy wait"},
                "config": {"heartbeat_timeout": 300, "agent_token": token,
                           "agent_token_required": True}})
        else:
            self._answer(404, {"error_message": "not found"})

    def do_POST(self):
        req = self._record("POST")
        ok = req.path == f"/v1/heartbeat/{self.server.api.node_uuid}"
        self._answer(202 if ok else 404)


class RamdiskAPI:
    """Ironic's ramdisk API on 127.0.0.1 (10.0.2.2 to the guest), recording every request.

    node_uuid=None answers every lookup 404 (no such node, as Ironic does): the ramdisk keeps
    looking up and never heartbeats."""

    def __init__(self, node_uuid="default", address="127.0.0.1"):
        self.node_uuid = str(uuidlib.uuid4()) if node_uuid == "default" else node_uuid
        self.token = uuidlib.uuid4().hex + uuidlib.uuid4().hex     # 64 chars; IPA wants >= 32
        self.token_handed_out = None
        self.address = address
        self.requests = []
        self._cond = threading.Condition()
        self._server = None

    def __enter__(self):
        self._server = http.server.ThreadingHTTPServer((self.address, 0), _Handler)
        self._server.api = self
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
        return False

    @property
    def guest_url(self):
        return f"http://{GUEST_HOST_ADDRESS}:{self._server.server_address[1]}"

    def _add(self, req):
        with self._cond:
            self.requests.append(req)
            self._cond.notify_all()

    def first(self, method, path_prefix):
        return next((r for r in self.requests
                     if r.method == method and r.path.startswith(path_prefix)), None)

    def wait_for(self, method, path_prefix, vm=None, timeout=600):
        """The first such request; fails early if the VM's qemu exits or panics."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = self.first(method, path_prefix)
                if found:
                    return found
                if vm is not None and not vm.running():
                    raise VMError(f"{vm.name}: qemu exited before {method} {path_prefix}")
                if vm is not None and "Kernel panic" in vm.console_text():
                    raise VMError(f"{vm.name}: kernel panic before {method} {path_prefix}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise VMError(f"no {method} {path_prefix} after {timeout} s")
                self._cond.wait(min(left, 1.0))


class IpaVM(VM):
    """A VM booting the IPA ramdisk: no SSH in it (IPA listens on 9999 and talks to Ironic), so
    `with` only starts qemu; the console (IPA logs to it too) is the window in. Stopping goes
    straight to SIGTERM."""

    def __init__(self, ramdisk, api_url, *, name="ipa", append="", **kwargs):
        super().__init__(ramdisk=IpaRamdisk(ramdisk.directory), name=name,
                         append=f"ipa-api-url={api_url} {append}".strip(), **kwargs)

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.report_failure()
            self.close()
            raise
        return self

    def _pin(self, public_key):
        pass                      # no sshd, no host key

    def start(self):
        super().start()
        self._ssh = None          # so stop() does not wait for an SSH poweroff that cannot come

    @property
    def started_at(self):
        return self._started
