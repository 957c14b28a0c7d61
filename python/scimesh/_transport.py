"""HTTP calls to the coordinator: authentication, error bodies, retries.

Built on http.client rather than urllib.request for two reasons: an upload
is streamed from a file or a generator, and when the coordinator refuses
an upload early (a bad CSV record at line 3 of a big file) it answers and
stops reading, so the answer must be read even though sending the rest of
the body failed. The coordinator is reached directly: HTTP_PROXY and the
like are not used. Redirects are not followed (an API call that is
redirected is an error that names where it was sent).

Connections are kept open between calls (HTTP keep-alive): an answer read
to its end gives its connection back for the next call, up to
MAX_IDLE of them, until Transport.close. A kept connection that the
coordinator closed meanwhile (it closes those idle for two minutes) fails
at once, with an error that says the peer closed it (reset, broken pipe,
end of stream, TLS close); a call that may be sent again is then sent on a
new one, which is not counted as a retry. Any other failure on a kept
connection (a read timeout, say, after the call was sent) goes to the
retries like a failure on a new connection.

A token sent over plain http:// to a host that is not loopback crosses
the network in the clear: the first call that does so says it on stderr,
once per process and coordinator address, however many clients send it.
"""

from __future__ import annotations

import email.utils
import http.client
import ipaddress
import json
import random
import ssl
import sys
import threading
import time
import urllib.parse
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from .errors import APIError, NetworkError

# Statuses worth another try of an idempotent call: the coordinator's 503
# (busy, not ready, at its cap of streams; with Retry-After), and a reverse
# proxy's 502 and 504 while the coordinator restarts.
RETRY_STATUSES = frozenset({502, 503, 504})

# The longest Retry-After honoured; a longer one is cut to this.
MAX_RETRY_AFTER = 300.0

# The most connections a transport keeps open between calls.
MAX_IDLE = 4

BodyFactory = Callable[[], Iterable[bytes]]

# The errors of a kept connection that show the coordinator closed it while
# it was idle: a reset or broken pipe (http.client's RemoteDisconnected, an
# answer that never began, is a ConnectionResetError) or a TLS close. Only
# these send the call again at once on a new connection; a timeout, say,
# may come after the call took effect, and goes to the retries.
_CLOSED_WHILE_IDLE = (ConnectionError, ssl.SSLEOFError, ssl.SSLZeroReturnError)

# The coordinator addresses already warned about (plain http, a token, not
# loopback): the warning is said once per process for each.
_warned: Set[str] = set()
_warned_lock = threading.Lock()


def _loopback(host: str) -> bool:
    """Whether host, a name or an IP address, is this machine: "localhost",
    or an address of 127.0.0.0/8 or ::1 (as the Go side decides)."""
    if host.rstrip(".").lower() == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _warn_plain_http(host: str, port: int) -> None:
    """Says once per process that the token goes in the clear to host:port."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    with _warned_lock:
        if where in _warned:
            return
        _warned.add(where)
    sys.stderr.write(
        f"warning: sending the token over plain http to {where}; "
        "anyone on the network path can read it and act with it \u2014 use https\n"
    )


class Body:
    """A request body to send, possibly streamed.

    ``open`` returns the bytes to send, as an iterable of pieces (a
    generator reading a file, say). When ``length`` is known it is sent as
    Content-Length, else the body goes with chunked transfer encoding.
    ``resendable`` says whether ``open`` may be called again to send the
    same bytes once more, which is what lets a failed call be retried.
    """

    def __init__(self, open: BodyFactory, length: Optional[int], resendable: bool) -> None:
        self.open = open
        self.length = length
        self.resendable = resendable


class Response:
    """A streamed 2xx answer: read it like a binary file, then close it."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse, release: Callable[..., None]) -> None:
        self._conn = conn
        self._resp = resp
        self._release = release
        self.status = resp.status
        self.headers = resp.headers

    def read(self, n: int = -1) -> bytes:
        # http.client reads to the end of the body on None; on -1 it would
        # wait for the connection to close.
        return self._resp.read(None if n < 0 else n)

    def close(self) -> None:
        self._release(self._conn, self._resp)

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Transport:
    """Sends requests to one coordinator with its token.

    ``retries`` is how many times a retryable call is tried again after the
    first; the delays grow from ``backoff`` seconds, doubling up to
    ``max_backoff``, each times a random factor in [0.5, 1], or follow the
    answer's Retry-After.
    """

    def __init__(
        self,
        url: str,
        token: Optional[str],
        *,
        timeout: float,
        retries: int,
        backoff: float,
        max_backoff: float,
        user_agent: str,
        ca_cert: Optional[str] = None,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"coordinator URL {url!r} is not an http:// or https:// URL")
        self._tls: Optional[ssl.SSLContext] = None
        if parts.scheme == "https":
            self._tls = _tls_context(ca_cert)
        self.url = url.rstrip("/")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._netloc = parts.netloc
        self._prefix = parts.path.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.user_agent = user_agent
        self.sleep: Callable[[float], None] = time.sleep  # tests replace it
        self._idle: List[http.client.HTTPConnection] = []  # kept open, most recent last
        self._lock = threading.Lock()

    def close(self) -> None:
        """Closes the connections kept open. The transport stays usable: a
        later call opens a new one."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def _release(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        """Keeps conn for the next call when resp was read to its end and
        the coordinator keeps the connection open; else closes it."""
        if resp.isclosed() and not resp.will_close:
            with self._lock:
                if len(self._idle) < MAX_IDLE:
                    self._idle.append(conn)
                    return
        resp.close()
        conn.close()

    def _target(self, path: str, query: Optional[Mapping[str, Any]]) -> str:
        target = self._prefix + path
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                target += "?" + urllib.parse.urlencode(q)
        return target

    def call(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        json_body: Any = None,
        body: Optional[Body] = None,
        headers: Optional[Mapping[str, str]] = None,
        idempotent: bool = True,
        timeout: Optional[float] = None,
        stream: bool = False,
        parse_json: bool = False,
    ) -> Any:
        """Performs one API call and returns the answer's body (or, with
        ``stream``, the open :class:`Response`, which the caller closes;
        with ``parse_json``, the body read as JSON: a 2xx answer that is
        not JSON raises :class:`APIError` ``invalid_response``).

        A 2xx answer is returned; any other raises :class:`APIError`. A
        call that is ``idempotent`` (and whose body, if any, can be sent
        again) is retried on 502/503/504 and on network errors, which end
        as :class:`NetworkError` when the retries run out.
        """
        target = self._target(path, query)
        hdrs: Dict[str, str] = {"User-Agent": self.user_agent, "Accept": "application/json"}
        payload: Optional[bytes] = None
        if json_body is not None:
            payload = json.dumps(json_body).encode("utf-8")
            hdrs["Content-Type"] = "application/json"
        if headers:
            hdrs.update(headers)
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
            if self._scheme == "http" and not _loopback(self._host):
                _warn_plain_http(self._host, self._port)
        retryable = idempotent and (body is None or body.resendable)
        attempt = 0
        while True:
            try:
                conn, resp = self._send(method, target, hdrs, payload, body, timeout, retryable)
                if 200 <= resp.status <= 299:
                    if stream:
                        return Response(conn, resp, self._release)
                    try:
                        raw = resp.read()
                    finally:
                        self._release(conn, resp)
                    if parse_json:
                        return _json_answer(raw, resp, method, path)
                    return raw
                hint = ""
                if resp.status in (301, 302, 303, 307, 308):
                    hint = f"; the coordinator URL {self.url!r} is redirected to {resp.getheader('Location')!r}: use that URL"
                try:
                    err = _api_error(resp, method, path, hint)
                finally:
                    conn.close()
                if retryable and resp.status in RETRY_STATUSES and attempt < self.retries:
                    self.sleep(self._delay(attempt, _retry_after(resp.getheader("Retry-After"))))
                    attempt += 1
                    continue
                raise err
            except ssl.SSLCertVerificationError as e:
                # Trying again would meet the same certificate.
                raise NetworkError(
                    f"{method} {self._scheme}://{self._netloc}{target}: {e}; the coordinator's certificate is not "
                    "trusted: for a private certificate authority, give its PEM file as ca_cert= or SCIMESH_CA_CERT"
                ) from e
            except (OSError, http.client.HTTPException) as e:
                if retryable and attempt < self.retries:
                    self.sleep(self._delay(attempt, None))
                    attempt += 1
                    continue
                tries = f" (tried {attempt + 1} times)" if attempt else ""
                raise NetworkError(f"{method} {self._scheme}://{self._netloc}{target}: {e or type(e).__name__}{tries}") from e

    def _send(
        self,
        method: str,
        target: str,
        hdrs: Dict[str, str],
        payload: Optional[bytes],
        body: Optional[Body],
        timeout: Optional[float],
        may_resend: bool,
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        t = self.timeout if timeout is None else timeout
        # A call that may not be sent twice goes on a new connection: on a
        # kept one, a failure could not tell a connection closed while idle
        # from an answer lost after the call took effect.
        if may_resend:
            with self._lock:
                kept = self._idle.pop() if self._idle else None
            if kept is not None:
                kept.timeout = t
                if kept.sock is not None:
                    kept.sock.settimeout(t)
                try:
                    return self._exchange(kept, method, target, hdrs, payload, body)
                except _CLOSED_WHILE_IDLE:
                    pass  # closed by the coordinator while kept: a new one
        return self._exchange(self._connect(t), method, target, hdrs, payload, body)

    def _exchange(
        self,
        conn: http.client.HTTPConnection,
        method: str,
        target: str,
        hdrs: Dict[str, str],
        payload: Optional[bytes],
        body: Optional[Body],
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Sends one request on conn and returns its answer's head; conn is
        closed when that fails."""
        headers = dict(hdrs)
        chunked = False
        data: Any = payload
        if body is not None:
            data = iter(body.open())
            if body.length is not None:
                headers["Content-Length"] = str(body.length)
            else:
                chunked = True
        try:
            try:
                conn.request(method, target, body=data, headers=headers, encode_chunked=chunked)
            except OSError:
                # Connected, the coordinator may have answered and stopped
                # reading (a refused upload): its answer says why, the
                # broken pipe not.
                if conn.sock is not None:
                    try:
                        return conn, conn.getresponse()
                    except (OSError, http.client.HTTPException):
                        pass
                raise
            return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self._tls is not None:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._tls)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _delay(self, attempt: int, retry_after: Optional[float]) -> float:
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER) + random.uniform(0, 0.1)
        return min(self.max_backoff, self.backoff * (2**attempt)) * random.uniform(0.5, 1.0)


def _tls_context(ca_cert: Optional[str]) -> ssl.SSLContext:
    """The TLS settings of an https:// coordinator: the system's certificate
    authorities, or with ca_cert (a PEM file) that file's alone. A CA file
    that cannot be read is a ValueError now rather than a failed call later."""
    try:
        return ssl.create_default_context(cafile=ca_cert)
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"cannot read the CA certificate {ca_cert!r} (ca_cert= or SCIMESH_CA_CERT): {e}") from e


def _retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a Retry-After header (seconds, or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _api_error(resp: http.client.HTTPResponse, method: str, path: str, hint: str = "") -> APIError:
    """Reads an error answer into an APIError, hint added to its message."""
    try:
        raw = resp.read(1 << 20)
    except (OSError, http.client.HTTPException):
        raw = b""
    code, message = APIError.code_for(resp.status), ""
    try:
        doc = json.loads(raw.decode("utf-8"))
        err = doc.get("error") if isinstance(doc, dict) else None
        if isinstance(err, dict):
            code = str(err.get("code") or code)
            message = str(err.get("message") or "")
    except (ValueError, UnicodeDecodeError):
        message = raw[:500].decode("utf-8", "replace").strip()
    if not message:
        message = resp.reason or http.client.responses.get(resp.status, "")
    return APIError(
        resp.status, code, message + hint, method=method, path=path, request_id=resp.getheader("X-Request-ID")
    )


def _json_answer(raw: bytes, resp: http.client.HTTPResponse, method: str, path: str) -> Any:
    """The JSON of a 2xx answer; what is not JSON (a proxy's HTML page, a
    cut body) is an APIError invalid_response that shows its start."""
    try:
        return json.loads(raw)
    except ValueError:  # json.JSONDecodeError, and UnicodeDecodeError
        pass
    if not raw:
        got = "an empty body"
    else:
        text = raw[:200].decode("utf-8", "replace")
        more = "..." if len(raw) > 200 else ""
        kind = resp.getheader("Content-Type")
        got = (f"{kind} " if kind else "") + repr(text) + more
    raise APIError(
        resp.status, "invalid_response", f"the answer is not JSON: {got}",
        method=method, path=path, request_id=resp.getheader("X-Request-ID"),
    )
