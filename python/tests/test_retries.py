"""Retries: a small HTTP server in front of the real coordinator answers
what each test scripts (503 with Retry-After, a lost answer, a proxy's
502 page) and forwards the rest."""

from __future__ import annotations

import http.client
import http.server
import os
import socket
import threading
import time
import urllib.parse
import uuid
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import scimesh
from conftest import Coordinator
from helpers import fingerprints, parse, tanimoto_top, write_fingerprints

# What a rule answers instead of the coordinator: (status, headers, body),
# or "lost" to forward the request and drop the coordinator's answer for a 503.
Answer = Optional[object]
Rule = Callable[["Seen"], Answer]


class Seen:
    """A request the front server received."""

    def __init__(self, method: str, path: str, headers: Dict[str, str], body: bytes) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body


class Front:
    """A threaded HTTP server on loopback that runs rule on each request."""

    def __init__(self, upstream: str) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.seen: List[Seen] = []
        self.rule: Rule = lambda seen: None
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        n = int(self.rfile.readline().split(b";")[0], 16)
                        if n == 0:
                            self.rfile.readline()
                            return out
                        out += self.rfile.read(n)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _handle(self) -> None:
                seen = Seen(self.command, self.path, dict(self.headers), self._body())
                front.seen.append(seen)
                answer = front.rule(seen)
                if answer is None or answer == "lost":
                    status, headers, body = front.forward(seen)
                    if answer == "lost":
                        status, headers, body = 503, {"Content-Type": "application/json"}, b'{"error":{"code":"unavailable","message":"lost"}}'
                else:
                    status, headers, body = answer
                self.send_response(status)
                for k, v in headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def forward(self, seen: Seen) -> Tuple[int, Dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
        headers = {k: v for k, v in seen.headers.items() if k.lower() not in ("host", "transfer-encoding", "content-length", "connection")}
        headers["Content-Length"] = str(len(seen.body))
        conn.request(seen.method, seen.path, body=seen.body, headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        return resp.status, dict(resp.getheaders()), body

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture()
def front(coord: Coordinator) -> Iterator[Front]:
    f = Front(coord.url)
    yield f
    f.close()


def _once(pred: Callable[[Seen], bool], answer: object) -> Rule:
    """A rule that gives answer to the first request pred matches."""
    done = []

    def rule(seen: Seen) -> Answer:
        if not done and pred(seen):
            done.append(1)
            return answer
        return None

    return rule


UNAVAILABLE = (503, {"Retry-After": "1", "Content-Type": "application/json"},
               b'{"error":{"code":"unavailable","message":"busy, try again"}}')


def test_503_with_retry_after(coord: Coordinator, front: Front) -> None:
    c = coord.client()
    job = c.submit(b"id,fingerprint\na,00\n", workload="nobody-runs-this")
    fc = scimesh.Client(front.url, coord.client_token, backoff=0.01)
    front.rule = _once(lambda s: s.method == "GET", UNAVAILABLE)
    began = time.monotonic()
    assert fc.job(job.id).id == job.id
    assert time.monotonic() - began >= 1.0  # Retry-After, not the 10 ms backoff
    assert [s.method for s in front.seen] == ["GET", "GET"]
    job.cancel()


def test_503_until_retries_run_out(coord: Coordinator, front: Front) -> None:
    front.rule = lambda s: (503, {"Content-Type": "application/json"}, UNAVAILABLE[2])
    fc = scimesh.Client(front.url, coord.client_token, retries=2, backoff=0.01)
    with pytest.raises(scimesh.APIError) as e:
        fc.jobs()
    assert (e.value.status, e.value.code, e.value.message) == (503, "unavailable", "busy, try again")
    assert len(front.seen) == 3


def test_proxy_error_page(coord: Coordinator, front: Front) -> None:
    front.rule = lambda s: (502, {"Content-Type": "text/html"}, b"<html>Bad Gateway</html>")
    fc = scimesh.Client(front.url, coord.client_token, retries=1, backoff=0.01)
    with pytest.raises(scimesh.APIError) as e:
        fc.jobs()
    assert (e.value.status, e.value.code) == (502, "unavailable") and "Bad Gateway" in e.value.message
    assert len(front.seen) == 2


def test_job_creation_whose_answer_is_lost(coord: Coordinator, front: Front, tmp_path) -> None:
    # The coordinator creates the job, its answer is lost (503): the retry,
    # with the same Idempotency-Key, gets the same job, not a second one.
    rows, query = fingerprints(300, seed=3)
    path = tmp_path / "fps.csv"
    write_fingerprints(path, rows)
    front.rule = _once(lambda s: s.method == "POST" and s.path == "/jobs", "lost")
    fc = scimesh.Client(front.url, coord.client_token, backoff=0.01)
    name = "lost-" + uuid.uuid4().hex
    job = fc.submit(path, workload="tanimoto", top_k=5, params={"query": query}, chunk_rows=100, name=name)
    creations = [s for s in front.seen if s.path == "/jobs"]
    assert len(creations) == 2
    keys = {s.headers["Idempotency-Key"] for s in creations}
    assert len(keys) == 1 and uuid.UUID(keys.pop()).version == 4
    assert [j.id for j in coord.client().jobs() if j.name == name] == [job.id]
    assert parse(job.wait(progress=False).result()) == tanimoto_top(rows, query, 5)


def test_upload_from_a_path_is_sent_again(coord: Coordinator, front: Front, tmp_path) -> None:
    rows, _ = fingerprints(500, seed=4)
    path = tmp_path / "fps.csv"
    write_fingerprints(path, rows)
    front.rule = _once(lambda s: s.path == "/upload", UNAVAILABLE)
    fc = scimesh.Client(front.url, coord.client_token, backoff=0.01)
    up = fc.upload(path)
    assert up.rows == 501
    uploads = [s for s in front.seen if s.path == "/upload"]
    assert len(uploads) == 2 and uploads[0].body == uploads[1].body == path.read_bytes()
    assert uploads[0].headers["Content-Length"] == str(path.stat().st_size)  # not chunked


def test_one_shot_stream_is_not_sent_again(coord: Coordinator, front: Front) -> None:
    front.rule = _once(lambda s: s.path == "/upload", UNAVAILABLE)
    fc = scimesh.Client(front.url, coord.client_token, backoff=0.01)
    r, w = os.pipe()
    os.write(w, b"id,fingerprint\na,00\n")
    os.close(w)
    with os.fdopen(r, "rb") as f, pytest.raises(scimesh.APIError) as e:
        fc.upload(f)
    assert e.value.status == 503
    assert len(front.seen) == 1
    assert front.seen[0].headers.get("Transfer-Encoding") == "chunked"


def test_network_errors(coord: Coordinator) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = scimesh.Client(f"http://127.0.0.1:{port}", "t", retries=2, backoff=0.01)
    slept: List[float] = []
    c._t.sleep = slept.append
    with pytest.raises(scimesh.NetworkError, match="tried 3 times"):
        c.jobs()
    assert len(slept) == 2 and slept[1] > 0
    # Backoff doubles, with jitter in [0.5, 1].
    c = scimesh.Client(f"http://127.0.0.1:{port}", "t", retries=6, backoff=1, max_backoff=8)
    slept.clear()
    c._t.sleep = slept.append
    with pytest.raises(scimesh.NetworkError):
        c.job("s0:x")
    assert len(slept) == 6, slept
    for n, d in enumerate(slept):
        assert min(8, 2**n) * 0.5 <= d <= min(8, 2**n), slept
