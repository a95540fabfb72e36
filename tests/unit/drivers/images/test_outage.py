"""The image server gone for a while mid-download (issue 57): the download resumes when it
comes back within --image_stall_seconds of the last byte and fails, naming the outage and the
option, once that has passed. Before, five attempts over ~3 s were all an outage got."""

import threading
import time

import pytest

from provision_agent.drivers.images import sources, stall
from provision_agent.errors import ImageError
from tests.unit.drivers.images.test_sources import DATA, Handler, Server, read_all


class Outage:
    """The test server on one port that drops the first download after 1 MB, stops listening
    and, when `back_after` is given, listens again that many seconds later."""

    def __init__(self, back_after):
        self.back_after = back_after
        self.srv = self._serve(0)
        self.port = self.srv.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/a"
        self.srv.rules["a"] = {"drop_after": 1_000_000, "drops": 1}
        self.down_at = self.up_at = None

    def _serve(self, port):
        srv = Server(("127.0.0.1", port), Handler)
        srv.files, srv.rules, srv.requests = {"a": DATA}, {}, []
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        return srv

    def go_down(self):
        """Called once the first connection dropped: the port stops answering."""
        self.srv.shutdown()
        self.srv.server_close()
        self.down_at = time.monotonic()
        if self.back_after is not None:
            threading.Timer(self.back_after, self._come_back).start()

    def _come_back(self):
        self.srv = self._serve(self.port)
        self.up_at = time.monotonic()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class DropsThenDown:
    """A reader of the source that takes the server down as soon as the drop is seen."""

    def __init__(self, outage, src):
        self.outage, self.src, self.seen = outage, src, 0

    def read(self, n):
        data = self.src.read(min(n, 1_000_000 - self.seen) if self.seen < 1_000_000 else n)
        self.seen += len(data)
        if self.seen == 1_000_000 and self.outage.down_at is None:
            self.outage.go_down()
        return data


@pytest.fixture
def outage(request):
    o = Outage(request.param)
    yield o
    o.close()


@pytest.mark.parametrize("outage", [4], indirect=True)
def test_an_outage_within_the_stall_deadline_is_waited_out_and_the_download_resumes(outage):
    src = sources.open_source(outage.url, stall_seconds=10)
    got = read_all(DropsThenDown(outage, src))
    assert got == DATA
    assert outage.up_at - outage.down_at >= 4
    assert outage.srv.requests[-1][1].get("Range") == "bytes=1000000-"


@pytest.mark.parametrize("outage", [None], indirect=True)
def test_an_outage_past_the_stall_deadline_fails_naming_it_and_the_option(outage):
    src = sources.open_source(outage.url, stall_seconds=4)
    started = time.monotonic()
    with pytest.raises(ImageError) as exc:
        read_all(DropsThenDown(outage, src))
    took = time.monotonic() - started
    msg = str(exc.value)
    assert "cannot connect" in msg and outage.url in msg
    assert "after byte 1000000 of 3145728" in msg
    assert "--image_stall_seconds" in msg
    assert 4 <= took < 4 + 5 + 2        # the deadline, one back-off wait at most, slack


def test_the_stall_window_waits_while_there_is_no_connection(monkeypatch):
    now = [0.0]
    watch = stall.StallWatch(1000, 10, clock=lambda: now[0])
    watch.watch(object())
    watch.note(5000)
    now[0] = 10
    assert not watch.check()            # 5000 bytes in the first window
    watch.pause()                       # dropped: an outage of 30 s is not a stall
    now[0] = 40
    assert not watch.check()
    watch.watch(object())               # the next connection starts its own window
    now[0] = 49
    assert not watch.check()
    watch.note(10)
    now[0] = 50
    resp = watch._resp
    stalled = []
    monkeypatch.setattr(stall, "shutdown", stalled.append)
    assert watch.check()
    assert watch.stalled and stalled == [resp]
