"""The exceptions the package raises."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .client import Job

# The codes of the coordinator's error bodies, by HTTP status, for answers
# that carry none (a reverse proxy's HTML page, say).
_CODES = {
    400: "invalid_argument",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    409: "conflict",
    413: "too_large",
    502: "unavailable",
    503: "unavailable",
    504: "unavailable",
}


class Error(Exception):
    """The base of every error the package raises: ``except scimesh.Error``
    catches them all."""


class APIError(Error):
    """An error answer of the coordinator.

    ``status`` is the HTTP status (404), ``code`` the error code of the
    body ``{"error": {"code", "message"}}`` (``"not_found"``), ``message``
    its text for people. ``method`` and ``path`` name the call,
    ``request_id`` the coordinator's ID of the request (its log lines carry
    it), when it sent one. A 2xx answer that is not JSON (a proxy's page,
    say) is an APIError too, of its status, with the code
    ``"invalid_response"``.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        method: str = "",
        path: str = "",
        request_id: Optional[str] = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.method = method
        self.path = path
        self.request_id = request_id
        where = f" ({method} {path})" if method else ""
        super().__init__(f"{status} {code}: {message}{where}")

    @staticmethod
    def code_for(status: int) -> str:
        """The error code the coordinator uses for an HTTP status."""
        if status in _CODES:
            return _CODES[status]
        return "internal" if status >= 500 else "unknown"


class SourceError(Error):
    """What is being uploaded could not be read (a file that cannot be
    opened or read): not the network's fault, so never retried."""


class NetworkError(Error, ConnectionError):
    """The coordinator could not be reached (connection refused, reset,
    timed out), after the retries the call was allowed."""


class Timeout(Error, TimeoutError):
    """A wait ran out of time (``Job.wait(timeout=...)``) before the job
    was final; the job goes on. Also a ``TimeoutError``."""


class JobFailed(Error):
    """A job ended ``failed`` or ``cancelled`` while it was waited for.

    ``job`` is the :class:`scimesh.Job` as it ended (``job.status``,
    ``job.tasks``), ``status`` its status and ``error`` the job's error (for
    a failed job, which names the failed task; ``None`` for a cancelled one).
    """

    def __init__(self, job: "Job") -> None:
        self.job = job
        self.status: str = job.status
        self.error: Optional[str] = job.error
        detail = f": {self.error}" if self.error else ""
        super().__init__(f"job {job.id} {self.status}{detail}")
