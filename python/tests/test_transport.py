"""The transport: what it says about the token (a real coordinator), and
what it does with kept connections and answers that are not JSON (small
scripted servers)."""

from __future__ import annotations

import http.server
import os
import socket
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

import scimesh
from conftest import Coordinator


def non_loopback_ip() -> str:
    """An IPv4 address of this machine that is not loopback (the one its
    default route leaves from); skips, or fails under CI, without one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
            ip = s.getsockname()[0]
    except OSError:
        ip = ""
    if not ip or ip.startswith("127.") or ip == "0.0.0.0":
        msg = "this machine has no network address but loopback: the test of a remote address cannot run"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return ip


def test_plain_http_warning(binary: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A token sent over plain http to an address that is not loopback is
    warned about once per process and address, over many calls and
    clients; loopback, localhost, and calls without a token say nothing."""
    ip = non_loopback_ip()
    coord = Coordinator(binary, tmp_path, addr="0.0.0.0:0")
    try:
        port = urllib.parse.urlsplit(coord.url).port
        remote = f"http://{ip}:{port}"
        for base in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
            with scimesh.Client(base, token=coord.client_token) as c:
                c.jobs()
                c.jobs()
        with pytest.raises(scimesh.APIError) as e, scimesh.Client(remote, token="") as c:
            c.jobs()
        assert e.value.status == 401
        assert capsys.readouterr().err == ""

        for _ in range(2):
            with scimesh.Client(remote, token=coord.client_token) as c:
                for _ in range(3):
                    c.jobs()
        err = capsys.readouterr().err
        assert err.count("warning: sending the token over plain http to") == 1, err
        assert f"to {ip}:{port};" in err and "use https" in err, err
    finally:
        coord.stop()


class Scripted:
    """A threaded HTTP/1.1 server on loopback that counts the requests it
    receives and answers as ``mode`` says:

    - "hang": the first request on a connection at once (an empty job
      listing, the connection kept open), a later one on the same
      connection never (until close);
    - "close": each request at once, the connection kept open in the
      headers but closed right after the answer, as a coordinator closes
      an idle one;
    - "html": 200 with an HTML page, which is no JSON.
    """

    def __init__(self, mode: str) -> None:
        self.seen: List[str] = []
        self.release = threading.Event()
        lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            served = 0

            def log_message(self, *args) -> None:
                pass

            def _answer(self, status: int, kind: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            def _handle(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    server.seen.append(f"{self.command} {self.path}")
                self.served += 1
                if mode == "html":
                    self._answer(200, "text/html", b"<html><body>" + b"a proxy's page " * 40 + b"</body></html>")
                elif mode == "hang" and self.served > 1:
                    server.release.wait(30)
                    self.close_connection = True
                else:
                    self._answer(200, "application/json", b'{"jobs": [], "next_cursor": ""}')
                    if mode == "close":
                        self.close_connection = True

            do_GET = do_POST = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def scripted() -> Iterator[Callable[[str], Scripted]]:
    made: List[Scripted] = []

    def make(mode: str) -> Scripted:
        made.append(Scripted(mode))
        return made[-1]

    yield make
    for s in made:
        s.close()


def test_a_timeout_on_a_kept_connection_is_not_sent_again(scripted) -> None:
    """A call sent on a kept connection whose answer does not come in time
    may have taken effect: it goes to the retries (none here), not at once
    to a new connection."""
    server = scripted("hang")
    with scimesh.Client(server.url, token="", timeout=0.5, retries=0) as c:
        assert c.jobs() == []
        assert len(c._t._idle) == 1  # kept
        with pytest.raises(scimesh.Error) as e:
            c.jobs()
        assert isinstance(e.value, scimesh.NetworkError), e.value
    assert server.seen == ["GET /jobs?limit=100"] * 2, server.seen


def test_a_kept_connection_the_server_closed_is_replaced(scripted) -> None:
    """A kept connection that the server closed after its answer fails at
    once (the server is gone from it), and the call goes on a new
    connection, without a retry."""
    server = scripted("close")
    with scimesh.Client(server.url, token="", timeout=5, retries=0) as c:
        opened = []
        connect = c._t._connect
        c._t._connect = lambda timeout: opened.append(timeout) or connect(timeout)
        assert c.jobs() == []
        assert len(c._t._idle) == 1  # the headers did not say close
        time.sleep(0.2)  # the server closes it meanwhile
        assert c.jobs() == []
        assert len(opened) == 2, opened
    assert len(server.seen) == 2, server.seen  # nothing reached the closed connection


def test_an_answer_that_is_not_json(scripted) -> None:
    """A 2xx answer that is not JSON (a proxy's page) is an APIError
    invalid_response of its status that shows what came back, cut short."""
    server = scripted("html")
    with scimesh.Client(server.url, token="", retries=0) as c:
        for call in (lambda: c.job("s0:j1"), lambda: c.upload(b"id,fingerprint\na,00\n"), c.jobs):
            with pytest.raises(scimesh.APIError) as e:
                call()
            assert (e.value.status, e.value.code) == (200, "invalid_response"), e.value
            assert "not JSON" in e.value.message and "text/html" in e.value.message and "<html>" in e.value.message
            assert len(e.value.message) < 300 and e.value.message.endswith("..."), e.value.message
