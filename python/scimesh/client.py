"""The client of a SciMesh coordinator: submit tables, follow jobs, fetch
results."""

from __future__ import annotations

import datetime
import io
import math
import os
import shutil
import time
import urllib.parse
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import __version__
from ._progress import Progress, make_bar
from ._source import Source, body_of
from ._transport import Response, Transport
from .errors import JobFailed, Timeout
from .types import Account, Task, TaskCounts, Upload, Usage, Worker, Workload

FINAL = frozenset({"completed", "failed", "cancelled"})

# A time as Client.usage takes it.
_Instant = Optional[Union[str, datetime.date, datetime.datetime]]

# The longest a single long-poll holds (the coordinator allows 60 s).
_WAIT_SLICE = 30

# The items a call asks for of the listings that take no page_size
# (tasks, workers): the coordinator's most.
_PAGE = 1000


class Client:
    """A connection to one coordinator.

    ``url`` defaults to the environment's ``SCIMESH_COORDINATOR`` (else
    ``http://127.0.0.1:8080``), ``token`` to ``SCIMESH_TOKEN`` (your
    account's token, or the coordinator's client token, ``CLIENT_AUTH_TOKEN``). ``timeout`` bounds
    each network operation in seconds. Calls that are safe to repeat (reads,
    cancel, job creation, which carries an ``Idempotency-Key``, and
    uploads that can be sent again) are retried up to ``retries`` times on
    502/503/504 answers (after their ``Retry-After``) and on network errors,
    with exponential backoff from ``backoff`` seconds, with jitter.

    An ``https://`` coordinator's certificate is checked against the
    system's certificate authorities, or with ``ca_cert`` (default the
    environment's ``SCIMESH_CA_CERT``), a PEM file, against that file's
    alone: the way to trust a private authority.
    """

    def __init__(
        self,
        url: Optional[str] = None,
        token: Optional[str] = None,
        *,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        ca_cert: "Optional[Union[str, os.PathLike[str]]]" = None,
    ) -> None:
        url = url or os.environ.get("SCIMESH_COORDINATOR") or "http://127.0.0.1:8080"
        token = token if token is not None else os.environ.get("SCIMESH_TOKEN") or None
        ca = os.fspath(ca_cert) if ca_cert is not None else os.environ.get("SCIMESH_CA_CERT") or None
        self._t = Transport(
            url,
            token,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
            max_backoff=max_backoff,
            user_agent=f"scimesh-python/{__version__}",
            ca_cert=ca,
        )

    @property
    def url(self) -> str:
        """The coordinator's URL."""
        return self._t.url

    def __repr__(self) -> str:
        return f"scimesh.Client({self.url!r})"

    def close(self) -> None:
        """Closes the connections the client keeps open between calls (it
        reuses them: one per call at a time, up to four kept). The client
        stays usable; a later call connects again. ``with Client() as c:``
        closes them at the end of the block."""
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # What the calls return: an object of scimesh.types (a Job for a job),
    # and a list for several. A listing that comes in pages (jobs, tasks,
    # workers) is read whole before the list is returned; its iter_ twin
    # yields the items as their pages arrive.

    # Uploads and jobs.

    def upload(self, source: Source) -> Upload:
        """Uploads a table and returns it as an :class:`Upload`; see
        :meth:`submit` for what ``source`` may be. The coordinator checks
        the CSV as it arrives: a bad record is an :class:`APIError` 400
        ``invalid_argument`` naming its line."""
        body = body_of(source)
        return Upload.from_json(self._json("POST", "/upload", body=body, headers={"Content-Type": "text/csv"}))

    def submit(
        self,
        source: Source,
        *,
        workload: str,
        top_k: Optional[int] = None,
        params: Optional[Dict[str, Any]] = None,
        chunk_rows: Optional[int] = None,
        score_column: Optional[str] = None,
        order: Optional[str] = None,
        name: Optional[str] = None,
        priority: Optional[int] = None,
        timeout_seconds: Optional[int] = None,
        has_header: Optional[bool] = None,
        max_attempts: Optional[int] = None,
        lease_seconds: Optional[int] = None,
        workers: Optional[str] = None,
        quorum: Optional[int] = None,
        columns: Optional[Sequence[str]] = None,
        id_column: Optional[str] = None,
        cache: Optional[bool] = None,
        speculate_after: Optional[float] = None,
        idempotency_key: Optional[str] = None,
    ) -> "Job":
        """Uploads ``source`` and creates a job over it: score every row with
        ``workload`` and keep the best ``top_k``.

        ``source`` is a path (``str`` or ``pathlib.Path``: streamed from
        disk, never read whole), a file object opened for reading (binary or
        text), a pandas ``DataFrame`` (written as CSV a slice at a time; a
        named index becomes the first column(s)) or the CSV as ``bytes``.

        ``params`` is the job's parameters, handed to the workload
        (``SCIMESH_PARAMETERS``). Options left ``None`` take the
        coordinator's defaults: ``top_k`` 100, ``chunk_rows`` 10000,
        ``score_column`` "score", ``order`` "desc" (or "asc"), ``name``
        the path's base name (``""`` for what is not a path), ``priority`` 0 (higher first), ``timeout_seconds`` 0 (none),
        ``has_header`` True, ``max_attempts`` 3, ``lease_seconds`` 120.

        ``workers`` says who may run the chunks: "trusted" (the default),
        "own" (also this account's worker keys) or "any" (any worker key);
        with "any", ``quorum`` (1-5, default 2) accounts must agree on an
        untrusted worker's output before it counts.

        ``columns`` names input columns that the final CSV carries after the
        scores, joined by ``id_column`` (default "id"), so that each kept row
        comes with, say, its SMILES.

        ``cache=False`` runs every chunk even when the coordinator
        remembers its output from an earlier job (the default reuses them,
        so a resubmitted job costs only what changed).

        ``speculate_after`` (default 3; 0 turns it off, else 1-100): once
        no chunk waits and at least 5 completed, a chunk running longer
        than this many times their median time gets a backup attempt on a
        trusted worker, while an attempt is left for it, and the first
        result counts.

        The job is created with an ``Idempotency-Key`` (``idempotency_key``,
        else a fresh UUID), so that a creation whose answer was lost is
        retried without making a second job.
        """
        if name is None and isinstance(source, (str, os.PathLike)):
            name = os.path.basename(os.fspath(source))
        up = self.upload(source)
        spec: Dict[str, Any] = {"workload": workload, "input": {"upload_id": up.upload_id}}
        options = {
            "name": name,
            "parameters": params,
            "chunk_rows": chunk_rows,
            "has_header": has_header,
            "top_k": top_k,
            "score_column": score_column,
            "order": order,
            "max_attempts": max_attempts,
            "lease_seconds": lease_seconds,
            "priority": priority,
            "timeout_seconds": timeout_seconds,
            "workers": workers,
            "quorum": quorum,
            "columns": list(columns) if columns is not None else None,
            "id_column": id_column,
            "cache": cache,
            "speculate_after": speculate_after,
        }
        spec.update({k: v for k, v in options.items() if v is not None})
        key = idempotency_key or str(uuid.uuid4())
        return Job(self, self._json("POST", "/jobs", json_body=spec, headers={"Idempotency-Key": key}))

    def job(self, job_id: str) -> "Job":
        """The job ``job_id`` as it is now (:class:`APIError` 404
        ``not_found`` when there is none)."""
        return Job(self, self._get_job(job_id))

    def jobs(
        self,
        status: Optional[str] = None,
        *,
        owner: Optional[str] = None,
        limit: Optional[int] = None,
        page_size: int = 100,
    ) -> List["Job"]:
        """A list of the jobs in the coordinator's order, optionally only
        those of ``status`` (pending, running, completed, failed,
        cancelled), only those of the account ``owner`` (for admins: an
        account sees only its own) and at most ``limit`` of them; reads
        every page of the listing, ``page_size`` (1-1000) jobs a call,
        before it returns. :meth:`iter_jobs` yields them as they come."""
        return list(self.iter_jobs(status, owner=owner, limit=limit, page_size=page_size))

    def iter_jobs(
        self,
        status: Optional[str] = None,
        *,
        owner: Optional[str] = None,
        limit: Optional[int] = None,
        page_size: int = 100,
    ) -> Iterator["Job"]:
        """The jobs of :meth:`jobs`, one at a time: a page is read when the
        previous one is used up."""
        for j in self._pages("/jobs", "jobs", {"status": status, "owner": owner}, page_size, limit):
            yield Job(self, j)

    def tasks(self, job_id: str, state: Optional[str] = None) -> List[Task]:
        """A list of the chunk tasks of job ``job_id`` (:class:`Task`), in
        chunk order, optionally only those in ``state``; reads every page
        of the listing before it returns. :meth:`iter_tasks` yields them as they
        come."""
        return list(self.iter_tasks(job_id, state))

    def iter_tasks(self, job_id: str, state: Optional[str] = None) -> Iterator[Task]:
        """The tasks of :meth:`tasks`, one at a time: a page (of 1000) is
        read when the previous one is used up."""
        for t in self._pages(f"/jobs/{_seg(job_id)}/tasks", "tasks", {"state": state}, _PAGE):
            yield Task.from_json(t)

    def task(self, task_id: str) -> Task:
        """One task (``GET /tasks/{task_id}``), as a :class:`Task`."""
        return Task.from_json(self._json("GET", f"/tasks/{_seg(task_id)}"))

    def logs(self, task_id: str) -> str:
        """The log of task ``task_id``: the stderr lines of its workload, of
        every attempt, as text."""
        return self._t.call("GET", f"/tasks/{_seg(task_id)}/logs").decode("utf-8", "replace")

    def workloads(self) -> List[Workload]:
        """The workloads that the workers seen in the last ten minutes
        announce (``GET /workloads``), by name: a list of
        :class:`Workload`. A job may name a workload that is not listed;
        it waits for a worker."""
        return [Workload.from_json(w) for w in self._json("GET", "/workloads").get("workloads") or []]

    def workers(self) -> List[Worker]:
        """The workers the coordinator keeps (those seen in the last seven
        days), most recently seen first (``GET /workers``): those of your
        account's worker keys, or every worker with an admin's token: a
        list of :class:`Worker`; reads every page of the listing before it
        returns. :meth:`iter_workers` yields them as they come."""
        return list(self.iter_workers())

    def iter_workers(self) -> Iterator[Worker]:
        """The workers of :meth:`workers`, one at a time: a page (of 1000)
        is read when the previous one is used up."""
        for w in self._pages("/workers", "workers", {}, _PAGE):
            yield Worker.from_json(w)

    # Accounts.

    def account(self) -> Account:
        """The caller's own account (``GET /account``), as an
        :class:`Account`."""
        return Account.from_json(self._json("GET", "/account"))

    # Accounting.

    def usage(
        self,
        since: "_Instant" = None,
        until: "_Instant" = None,
        by: "Optional[str | Sequence[str]]" = None,
    ) -> Any:
        """The worker time charged to your jobs (an admin's token: to
        everyone's), summed by ``by``: any of ``"account"``,
        ``"workload"``, ``"day"``, ``"worker_account"``, as a list or a
        comma-separated string (default ``"account"``).

        Each attempt's leased time, from its claim to its result, failure,
        release, expiry or cancellation, is charged to its task's owner in
        the hour it ended. ``since`` and ``until`` are RFC 3339 strings,
        dates (``"2026-03-01"``, ``datetime.date``: midnight UTC) or
        ``datetime.datetime`` (naive ones are UTC); ``until`` is excluded
        and defaults to now, ``since`` to the oldest usage kept. Usage is
        kept per hour: an hour counts when it overlaps the interval.

        With pandas installed, a ``DataFrame`` with a column per field of
        ``by`` (in its order; ``day`` as datetimes), then ``tasks`` (the
        attempts) and ``worker_seconds``; without, a list of
        :class:`Usage`, whose keys are the same (the fields not in ``by``
        are None). A ``worker_account`` of ``""`` is the installation's
        own workers.
        """
        fields = [f.strip() for f in by.split(",")] if isinstance(by, str) else list(by or ["account"])
        rows = self._json(
            "GET",
            "/usage",
            query={"since": _instant(since), "until": _instant(until), "by": ",".join(fields)},
        ).get("usage") or []
        try:
            import pandas as pd
        except ImportError:
            return [Usage.from_json(r) for r in rows]
        df = pd.DataFrame(rows, columns=fields + ["tasks", "worker_seconds"])
        df["tasks"] = df["tasks"].astype("int64")
        df["worker_seconds"] = df["worker_seconds"].astype("float64")
        if "day" in fields:
            df["day"] = pd.to_datetime(df["day"], format="%Y-%m-%d")
        return df

    # What Job calls.

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        """The answer's JSON; one that is not JSON is an APIError
        ``invalid_response``."""
        return self._t.call(method, path, parse_json=True, **kwargs)

    def _pages(
        self, path: str, key: str, query: Dict[str, Any], page_size: int, limit: Optional[int] = None
    ) -> Iterator[Dict[str, Any]]:
        """The items of a listing that comes in pages (``{key: [...],
        "next_cursor"}``), at most limit of them, page_size a call; a page
        is asked for when the previous one is used up."""
        n = 0
        cursor: Optional[str] = None
        while limit is None or n < limit:
            page = page_size if limit is None else min(page_size, limit - n)
            doc = self._json("GET", path, query={**query, "limit": page, "cursor": cursor})
            items = doc.get(key) or []
            for item in items:
                n += 1
                yield item
            cursor = doc.get("next_cursor")
            if not cursor or not items:
                return

    def _get_job(self, job_id: str, wait: int = 0, after: Optional[str] = None) -> Dict[str, Any]:
        if after:
            # The coordinator may hold the call for wait seconds: the read
            # timeout must outlast it.
            return self._json(
                "GET",
                f"/jobs/{_seg(job_id)}",
                query={"wait_seconds": wait, "after": after},
                timeout=wait + self._t.timeout,
            )
        return self._json("GET", f"/jobs/{_seg(job_id)}")


class Job:
    """A job of a coordinator, as last read (:meth:`refresh` reads it again).

    ``status`` is pending, running, completed, failed or cancelled;
    ``progress`` the share of chunks completed (0..1); ``tasks`` the counts
    of its chunk tasks by state (a :class:`TaskCounts`). ``data`` is the
    whole job object as the coordinator sent it, a dict.
    """

    def __init__(self, client: Client, data: Dict[str, Any]) -> None:
        self.client = client
        self.data = data

    @property
    def id(self) -> str:
        """The job's ID (``job_id``)."""
        return self.data["job_id"]

    @property
    def status(self) -> str:
        """pending, running, completed, failed or cancelled."""
        return self.data["status"]

    @property
    def progress(self) -> float:
        """Completed chunks over all chunks, 0..1."""
        return float(self.data.get("progress") or 0.0)

    @property
    def tasks(self) -> TaskCounts:
        """Counts of the job's chunk tasks by state, a
        :class:`TaskCounts`."""
        return TaskCounts.from_json(self.data.get("tasks") or {})

    @property
    def error(self) -> Optional[str]:
        """Why the job failed (it names the failed task), else None."""
        return self.data.get("error")

    @property
    def name(self) -> str:
        """The name given at submission."""
        return self.data.get("name") or ""

    @property
    def owner(self) -> str:
        """The account that created the job."""
        return self.data.get("owner") or ""

    @property
    def workers(self) -> str:
        """Who may run the job's chunks: "trusted", "own" or "any"."""
        return self.data.get("workers") or "trusted"

    @property
    def quorum(self) -> Optional[int]:
        """The accounts that must agree on an untrusted worker's output,
        for a job whose workers are "any"; else None."""
        return self.data.get("quorum")

    @property
    def done(self) -> bool:
        """Whether the job is final: completed, failed or cancelled."""
        return self.status in FINAL

    def __repr__(self) -> str:
        t = self.tasks
        return f"<scimesh.Job {self.id} {self.status} {t.completed}/{t.total} chunks>"

    def refresh(self) -> "Job":
        """Reads the job again; returns it."""
        self.data = self.client._get_job(self.id)
        return self

    def wait(self, progress: Progress = True, timeout: Optional[float] = None) -> "Job":
        """Waits until the job is final and returns it when it completed.

        Follows the job with long polls (``GET /jobs/{id}?wait_seconds=&
        after=``): the coordinator answers as soon as a chunk completes or
        the job ends. ``progress`` shows a bar on stderr: True is tqdm's
        (``tqdm.auto``, a widget in a notebook) when tqdm is installed, else
        a text bar; "tqdm" or "text" picks one, False shows none.

        Raises :class:`scimesh.JobFailed` when the job ends failed or
        cancelled, and :class:`scimesh.Timeout` (a ``TimeoutError``) when
        ``timeout`` seconds pass first (the job goes on).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        bar = make_bar(progress, self.id)
        try:
            self.refresh()
            while True:
                if bar is not None:
                    bar.update(self.data)
                if self.done:
                    break
                wait = _WAIT_SLICE
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise Timeout(
                            f"job {self.id} is still {self.status} after {timeout} s "
                            f"({self.tasks.completed}/{self.tasks.total} chunks)"
                        )
                    wait = max(1, min(wait, math.ceil(left)))
                self.data = self.client._get_job(self.id, wait=wait, after=self.data["progress_token"])
        finally:
            if bar is not None:
                bar.close()
        if self.status != "completed":
            raise JobFailed(self)
        return self

    def result(self) -> str:
        """The final CSV (the best top_k rows over all chunks) as text;
        :class:`APIError` 409 ``not_ready`` before the job completed."""
        return self.client._t.call("GET", f"/jobs/{_seg(self.id)}/result").decode("utf-8")

    def download(self, path: "str | os.PathLike[str]") -> None:
        """Writes the final CSV to ``path``, streamed."""
        resp = self.client._t.call("GET", f"/jobs/{_seg(self.id)}/result", stream=True)
        assert isinstance(resp, Response)
        with resp, open(path, "wb") as f:
            shutil.copyfileobj(resp, f, 1 << 20)

    def dataframe(self, **read_csv: Any) -> Any:
        """The final CSV as a pandas DataFrame; keyword arguments go to
        ``pandas.read_csv`` (``dtype={"id": str}``, say). Scores are read
        back exactly (``float_precision="round_trip"``: pandas' default
        parser may be off in the last digit)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError(
                "Job.dataframe() needs pandas, which is not installed: pip install pandas "
                "(or apt-get install python3-pandas); Job.result() gives the CSV as text without it"
            ) from None
        read_csv.setdefault("float_precision", "round_trip")
        return pd.read_csv(io.StringIO(self.result()), **read_csv)

    def peek(self, **read_csv: Any) -> Any:
        """The best rows so far: for a job not yet completed, the final CSV
        that its chunks completed so far give (same order, ties and
        format); for a completed job, its final CSV. A pandas DataFrame
        when pandas is installed (keyword arguments go to
        ``pandas.read_csv``; ``attrs["chunks_done"]`` and
        ``attrs["chunks_total"]`` say over how many chunks), else the CSV
        as text."""
        resp = self.client._t.call("GET", f"/jobs/{_seg(self.id)}/result", query={"partial": "true"}, stream=True)
        assert isinstance(resp, Response)
        with resp:
            text = resp.read().decode("utf-8")
            done = int(resp.headers.get("SciMesh-Chunks-Done") or 0)
            total = int(resp.headers.get("SciMesh-Chunks-Total") or 0)
        try:
            import pandas as pd
        except ImportError:
            return text
        read_csv.setdefault("float_precision", "round_trip")
        df = pd.read_csv(io.StringIO(text), **read_csv) if text else pd.DataFrame()
        df.attrs["chunks_done"], df.attrs["chunks_total"] = done, total
        return df

    def cancel(self) -> "Job":
        """Cancels the job (idempotent: a final job stays as it is); returns
        it as the coordinator answered."""
        self.data = self.client._json("POST", f"/jobs/{_seg(self.id)}/cancel")
        return self

    def retry(self) -> "Job":
        """Runs a failed or cancelled job's unfinished chunks again (the
        completed ones keep their outputs); :class:`APIError` 409
        ``conflict`` for a job that is pending, running or completed.

        It is sent once, not retried: a second try after a lost answer
        would find the job pending again and be refused, though the first
        worked. After a :class:`NetworkError`, :meth:`refresh` tells."""
        self.data = self.client._json("POST", f"/jobs/{_seg(self.id)}/retry", idempotent=False)
        return self

    def list_tasks(self, state: Optional[str] = None) -> List[Task]:
        """A list of the job's chunk tasks (:class:`Task`), optionally only
        those in ``state`` (for their ``task_id``, to read
        :meth:`Client.logs`): :meth:`Client.tasks` of this job."""
        return self.client.tasks(self.id, state)


def _instant(t: "_Instant") -> Optional[str]:
    """t as the coordinator reads a time: RFC 3339, or a date; a naive
    datetime is taken as UTC."""
    if t is None or isinstance(t, str):
        return t
    if isinstance(t, datetime.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=datetime.timezone.utc)
        return t.isoformat()
    if isinstance(t, datetime.date):
        return t.isoformat()
    raise TypeError(f"a time must be a str, a datetime.date or a datetime.datetime, not {type(t).__name__}")


def _seg(s: str) -> str:
    """s as one path segment (IDs are SHARD:LOCAL)."""
    return urllib.parse.quote(s, safe=":")
