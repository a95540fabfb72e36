"""HTTP answers that inflate far past what they weigh, served on
127.0.0.1, and a child interpreter that fetches one of them through provision's code under an
address-space limit, so a fetch that inflates everything dies of MemoryError in the child
instead of taking the test machine's memory.

Paths: /bomb (gzip Content-Encoding, 2 MiB on the wire, 2 GiB inflated), /double ("gzip, gzip":
the same inflated twice, a few KiB on the wire), /redirect (a 302 whose own body is the bomb,
to /doc), /doc (a small JSON document, no encoding).
"""

import functools
import http.server
import json
import os
import struct
import subprocess
import threading
import zlib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INFLATED_MIB = 2048
CHILD_LIMIT = 1 << 30       # address space of the child: half of what the bomb inflates to
DOC = b'{"version": 1}'


@functools.lru_cache(maxsize=None)
def gzip_zeros(mib=INFLATED_MIB):
    """One gzip member of mib MiB of zeros. A full flush ends each MiB's deflate blocks on a
    byte boundary with nothing carried over, so one MiB's blocks repeat as they are."""
    mib_zeros = bytes(1 << 20)
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head = z.compress(mib_zeros) + z.flush(zlib.Z_FULL_FLUSH)
    block = z.compress(mib_zeros) + z.flush(zlib.Z_FULL_FLUSH)
    end = z.flush()[:-8]            # the final empty block; the trailer is for all mib MiB
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(mib_zeros, crc)
    return head + block * (mib - 1) + end + struct.pack("<II", crc, (mib << 20) & 0xFFFFFFFF)


def gzip_twice():
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return z.compress(gzip_zeros()) + z.flush()


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.path.split("?")[0]
        self.server.asked.append((path, self.headers.get("Accept-Encoding")))
        if path == "/doc":
            return self._send(200, DOC)
        if path == "/double":
            return self._send(200, gzip_twice(), "gzip, gzip")
        if path == "/redirect":
            return self._send(302, gzip_zeros(), "gzip", Location="/doc")
        return self._send(200, gzip_zeros(), "gzip")

    def _send(self, status, body, encoding=None, **headers):
        self.send_response(status)
        if encoding:
            self.send_header("Content-Encoding", encoding)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass        # the client stopped reading: what the fix does


class BombServer:
    def __enter__(self):
        gzip_zeros()        # built before a request waits on it
        self._srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._srv.asked = self.asked = []       # (path, Accept-Encoding) of every request
        self._srv.daemon_threads = True
        self._srv.block_on_close = False
        threading.Thread(target=self._srv.serve_forever, daemon=True).start()
        return self

    def url(self, path):
        return f"http://127.0.0.1:{self._srv.server_address[1]}{path}?temp_url_sig=SECRET"

    def __exit__(self, *exc):
        self._srv.shutdown()
        self._srv.server_close()


# The child: argv limit, repo, what (input, configdrive or image), url; prints one JSON line.
_CHILD = r"""
import json, resource, sys
limit, repo, what, url = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.path.insert(0, repo)
import urllib3
result = {"urllib3": urllib3.__version__}
try:
    if what == "input":
        from provision_agent.cli import input_source
        got = input_source.fetch(url, attempts=1)
    elif what == "configdrive":
        from provision_agent.drivers import configdrive
        got = configdrive.fetch(url).encode()
    else:
        from provision_agent.drivers.images import sources
        src, got = sources.open_source(url, retries=1), b""
        while len(got) <= 64 << 20:
            data = src.read(1 << 20)
            if not data:
                break
            got += data
        src.close()
    result.update(ok=True, got=got[:64].decode("latin-1"), length=len(got))
except BaseException as exc:
    result.update(ok=False, error=type(exc).__name__, message=str(exc)[:500],
                  exit_code=getattr(exc, "exit_code", None))
# VmHWM is this process's own peak: ru_maxrss is not, Linux carries the spawning process's peak
# across exec (the pytest worker that spawned this child, 515 MiB in CI's 2026-11-29 run).
with open("/proc/self/status") as status:
    hwm = [line.split()[1] for line in status if line.startswith("VmHWM:")]
result["maxrss_mib"] = int(hwm[0]) >> 10
print(json.dumps(result))
"""


def fetch_in_child(python, what, url, timeout=120):
    """What the child saw: {"ok", "got"/"length" or "error"/"message"/"exit_code",
    "maxrss_mib", "urllib3"}."""
    proc = subprocess.run([python, "-c", _CHILD, str(CHILD_LIMIT), REPO, what, url],
                          capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, PYTHONPATH=""))
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise AssertionError(f"the child printed nothing (exit {proc.returncode}):\n"
                             f"{proc.stderr[-2000:]}")
    return json.loads(lines[-1])
