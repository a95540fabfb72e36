"""HTTP answers that inflate past their weight, fetched by provision's
code in a child interpreter limited to 1 GiB of address space: here under this environment's
urllib3 2.x; tests/functional/test_http_bombs.py runs the same tests under Debian's urllib3
1.26, the one the ramdisk carries (where even a plain gzip answer used to inflate whole)."""

import gzip
import io
import json
import subprocess
import sys
import zlib

import pytest

from provision_agent import bounded_http
from tests.bombserver import DOC, REPO, BombServer, fetch_in_child, gzip_zeros

BOUND_MIB = 512     # the input limit is 128 MiB: its buffer and one copy, plus the interpreter


@pytest.fixture
def python():
    return sys.executable


@pytest.fixture(scope="module")
def bombs():
    with BombServer() as srv:
        yield srv


@pytest.mark.parametrize("what,exit_code", [("input", 6), ("configdrive", 5)])
@pytest.mark.parametrize("path,says", [
    ("/bomb", "larger than"),
    ("/double", "Content-Encoding 'gzip, gzip', which is not read"),
])
def test_an_answer_that_inflates_past_the_limit_is_refused_in_bounded_memory(
        python, bombs, what, exit_code, path, says):
    bombs.asked.clear()
    got = fetch_in_child(python, what, bombs.url(path))
    assert got["ok"] is False and got["exit_code"] == exit_code, got
    assert says in got["message"] and "SECRET" not in got["message"], got
    assert got["maxrss_mib"] < BOUND_MIB, got
    assert bombs.asked == [(path, "identity")]


@pytest.mark.parametrize("what", ["input", "configdrive", "image"])
def test_a_redirects_own_body_is_never_read(python, bombs, what):
    got = fetch_in_child(python, what, bombs.url("/redirect"))
    assert got["ok"] is True and got["got"] == DOC.decode(), got
    assert got["maxrss_mib"] < BOUND_MIB, got


def test_an_image_served_with_content_encoding_is_read_as_the_server_stores_it(python, bombs):
    """Never inflated by the HTTP layer: the checksum and the decompressor get the wire bytes
    (the decompressor writes what it inflates to disk a block at a time)."""
    bombs.asked.clear()
    got = fetch_in_child(python, "image", bombs.url("/bomb"))
    assert got["ok"] is True and got["length"] == len(gzip_zeros()), got
    assert got["got"] == gzip_zeros()[:64].decode("latin-1")
    assert got["maxrss_mib"] < BOUND_MIB, got
    assert bombs.asked == [("/bomb", "identity")]


class _Resp:
    """A response as bounded_http reads it: raw.read(n, decode_content=False) and headers."""

    def __init__(self, body, encoding=None, piece=1000, fail_after=None):
        self.headers = {"Content-Encoding": encoding} if encoding else {}
        self._body, self._piece, self._fail = io.BytesIO(body), piece, fail_after
        self.raw = self

    def read(self, n, decode_content):
        assert decode_content is False
        if self._fail is not None and self._body.tell() >= self._fail:
            raise ConnectionResetError("reset")
        return self._body.read(min(n, self._piece))


TEXT = bytes(range(256)) * 4000 + bytes(3 << 20)


@pytest.mark.parametrize("body,encoding", [
    (TEXT, None), (gzip.compress(TEXT), "gzip"), (gzip.compress(TEXT), "x-gzip"),
    (zlib.compress(TEXT), "deflate"), (gzip.compress(TEXT), "identity, gzip"),
    (gzip.compress(TEXT[:5000]) + gzip.compress(TEXT[5000:]), "gzip"),     # two members
])
def test_what_is_read_is_the_decoded_body(body, encoding):
    assert bounded_http.read(_Resp(body, encoding), len(TEXT), 60) == TEXT


@pytest.mark.parametrize("resp,says", [
    (_Resp(TEXT), "larger than 1000000 bytes"),
    (_Resp(gzip.compress(TEXT), "gzip"), "larger than 1000000 bytes once inflated"),
    (_Resp(gzip.compress(TEXT[:999_000])[:-30], "gzip"), "ends early"),
    (_Resp(b"\x1f\x8b not gzip", "gzip"), "corrupt"),
    (_Resp(b"x", "br"), "Content-Encoding 'br', which is not read"),
    (_Resp(b"x", "x" * 10_000), "Content-Encoding 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'"),
])
def test_too_large_corrupt_or_unknown_encodings_are_body_errors(resp, says):
    with pytest.raises(bounded_http.BodyError) as exc:
        bounded_http.read(resp, 1_000_000, 60)
    assert says in str(exc.value) and len(str(exc.value)) < 200


def test_a_slow_answer_meets_the_deadline_and_a_broken_one_can_be_retried():
    with pytest.raises(bounded_http.BodyError, match="longer than 0 s"):
        bounded_http.read(_Resp(TEXT), len(TEXT), 0)
    with pytest.raises(bounded_http.BodyBroken, match="failed after 5000 bytes"):
        bounded_http.read(_Resp(TEXT, fail_after=5000), len(TEXT), 60)


_BIG_PARENT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from tests.bombserver import fetch_in_child
ballast = bytearray(int(sys.argv[3]) << 20)
ballast[::4096] = b"\1" * len(ballast[::4096])    # touched, so it counts in this process's RSS
print(json.dumps(fetch_in_child(sys.executable, "input", sys.argv[2])))
"""


def test_the_childs_memory_figure_is_its_own_not_its_spawners(python, bombs):
    """The bound above is the child's: spawned from a process 600 MiB large (as a pytest worker
    grows over the suite), the child fetching 14 bytes still reports far less than the bound."""
    proc = subprocess.run([python, "-c", _BIG_PARENT, REPO, bombs.url("/redirect"),
                           "600"], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["ok"] is True and got["got"] == DOC.decode(), got
    assert got["maxrss_mib"] < 100, got
