"""What the client's calls return: one frozen dataclass per object of the
coordinator's REST API.

Each type is built from the coordinator's JSON by ``from_json``, which
ignores fields it does not know (a newer coordinator may add some) and
gives a field that is missing its default (an older one may lack it).
Read the fields as attributes (``task.state``); times are kept as the
RFC 3339 strings the coordinator sends (``"2026-03-01T12:00:05Z"``), JSON
arrays become tuples and JSON objects of no fixed shape (a task's
``parameters``) dicts.

They are also read-only mappings of the fields this version knows
(missing ones with their defaults; fields of a newer coordinator are not
among them), so that code written when the client returned dicts keeps
working: ``task["state"]``, ``task.get("error")``, ``"usage" in
account``, ``dict(task)``. Mapping access gives JSON values (a nested
object as a dict, an array as a list); ``to_dict()`` gives a new dict of
them, which ``json.dumps(obj.to_dict())`` serializes. An object equals a
dict of the same fields. ``Task.parameters`` is a plain dict, so a Task
is not hashable.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, Tuple, Type, TypeVar

__all__ = [
    "APIObject",
    "Upload",
    "TaskCounts",
    "TaskInput",
    "Task",
    "Workload",
    "Worker",
    "AccountUsage",
    "Account",
    "Usage",
]

T = TypeVar("T", bound="APIObject")


class APIObject(Mapping[str, Any]):
    """The base of the client's return types: a frozen dataclass that is
    also a read-only mapping of the coordinator's JSON object."""

    # Fields the coordinator leaves out rather than send as null: while
    # None, they are not among the keys, nor in to_dict().
    _OMITTED_WHEN_NONE: Tuple[str, ...] = ()

    @classmethod
    def from_json(cls: Type[T], data: Mapping[str, Any]) -> T:
        """The object of the coordinator's JSON ``data``: fields the type
        does not know are ignored, fields missing or null take their
        defaults."""
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}.from_json takes a JSON object, not {type(data).__name__}")
        kwargs: Dict[str, Any] = {}
        for name, convert in _converters(cls).items():
            value = data.get(name)
            if value is not None:
                kwargs[name] = convert(value)
        return cls(**kwargs)

    def to_dict(self) -> Dict[str, Any]:
        """The object as JSON: a new dict of plain values (nested objects
        as dicts, arrays as lists) of the fields this version knows, with
        the defaults of those the coordinator left out."""
        return {name: _json(getattr(self, name)) for name in self._keys()}

    def _keys(self) -> Tuple[str, ...]:
        names = _field_names(type(self))
        if not self._OMITTED_WHEN_NONE:
            return names
        return tuple(n for n in names if not (n in self._OMITTED_WHEN_NONE and getattr(self, n) is None))

    # The mapping: the known fields, read-only.

    def __getitem__(self, key: str) -> Any:
        if key not in self:
            raise KeyError(key)
        return _json(getattr(self, key))

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def __contains__(self, key: object) -> bool:
        if key not in _field_names(type(self)):
            return False
        return not (key in self._OMITTED_WHEN_NONE and getattr(self, key) is None)  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            return all(getattr(self, n) == getattr(other, n) for n in _field_names(type(self)))
        if isinstance(other, Mapping) and not isinstance(other, APIObject):
            return self.to_dict() == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((type(self),) + tuple(getattr(self, n) for n in _field_names(type(self))))


def _json(value: Any) -> Any:
    """value as JSON: objects as dicts, tuples as lists, copied."""
    if isinstance(value, APIObject):
        return value.to_dict()
    if isinstance(value, (tuple, list)):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value


_FIELD_NAMES: Dict[type, Tuple[str, ...]] = {}


def _field_names(cls: type) -> Tuple[str, ...]:
    """The names of cls's fields, in order (read once per class)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


_CONVERTERS: Dict[type, Dict[str, Callable[[Any], Any]]] = {}


def _converters(cls: type) -> Dict[str, Callable[[Any], Any]]:
    """For each field of cls, how to make it of a JSON value that is not
    null (an Optional field is converted as its type)."""
    if cls not in _CONVERTERS:
        hints = typing.get_type_hints(cls)
        out = {}
        for name in _field_names(cls):
            tp = hints[name]
            if typing.get_origin(tp) is typing.Union:
                tp = [a for a in typing.get_args(tp) if a is not type(None)][0]
            out[name] = _converter(tp)
        _CONVERTERS[cls] = out
    return _CONVERTERS[cls]


def _converter(tp: Any) -> Callable[[Any], Any]:
    if isinstance(tp, type) and issubclass(tp, APIObject):
        return tp.from_json
    origin = typing.get_origin(tp)
    if origin is tuple:
        item = _converter(typing.get_args(tp)[0])
        return lambda v: tuple(item(x) for x in v)
    if origin is dict:
        return dict
    if tp is float:
        return float  # JSON's 3600 is an int
    return lambda v: v


_frozen = dataclasses.dataclass(frozen=True, eq=False)


@_frozen
class Upload(APIObject):
    """An uploaded table (``POST /upload``): name it in a job by its
    ``upload_id``. ``bytes`` are those stored (a UTF-8 BOM dropped),
    ``rows`` its CSV records, the header line included."""

    upload_id: str = ""
    bytes: int = 0
    sha256: str = ""
    rows: int = 0


@_frozen
class TaskCounts(APIObject):
    """A job's chunk tasks by state (``job.tasks``; the stitch is not
    counted). ``cached``: of the completed, those the chunk cache
    completed without running them."""

    total: int = 0
    pending: int = 0
    leased: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    cached: int = 0


@_frozen
class TaskInput(APIObject):
    """Where a task's chunk is: ``url`` (relative to the coordinator for a
    chunk of an upload), its ``sha256`` and ``bytes``; ``range`` and
    ``header_line`` only for a URL presigned into a blob store."""

    _OMITTED_WHEN_NONE = ("range", "header_line")

    url: str = ""
    sha256: str = ""
    bytes: int = 0
    range: Optional[str] = None
    header_line: Optional[str] = None


@_frozen
class Task(APIObject):
    """A chunk task (``GET /tasks/{id}``, ``GET /jobs/{id}/tasks``).
    ``state`` is waiting, pending, leased, completed, failed or
    cancelled; ``attempt`` the current attempt (0 before the first
    claim); ``error`` why it failed (its last failure while it is
    retried), else None; ``lease_owner`` the worker of the last claim;
    ``lease_expires_at`` is set while it is leased. The job's settings
    (``workload``, ``parameters``, ``top_k``, ...) come with it;
    ``parameters`` is a plain dict, so a Task is not hashable."""

    task_id: str = ""
    job_id: str = ""
    chunk_index: int = 0
    attempt: int = 0
    max_attempts: int = 0
    lease_expires_at: Optional[str] = None
    workload: str = ""
    parameters: Dict[str, Any] = dataclasses.field(default_factory=dict)
    top_k: int = 0
    score_column: str = ""
    order: str = ""
    has_header: bool = False
    timeout_seconds: int = 0
    input: TaskInput = dataclasses.field(default_factory=TaskInput)
    state: str = ""
    lease_owner: Optional[str] = None
    error: Optional[str] = None
    created_at: str = ""
    updated_at: str = ""


@_frozen
class Workload(APIObject):
    """A workload that connected workers announce (``GET /workloads``):
    how many ``workers`` do, the latest call of one of them
    (``last_seen``) and the ``versions`` they announce (sorted)."""

    name: str = ""
    workers: int = 0
    last_seen: str = ""
    versions: Tuple[str, ...] = ()


@_frozen
class Worker(APIObject):
    """A worker the coordinator keeps (``GET /workers``): its own ``id``,
    the ``account`` and ``key`` it calls with (both ``""`` for the
    installation's pool), whether it is ``trusted``, the ``workloads`` of
    its last claim (empty when it takes any), its last call
    (``last_seen``) and the tasks it completed (``tasks_done``)."""

    id: str = ""
    account: str = ""
    key: str = ""
    trusted: bool = False
    workloads: Tuple[str, ...] = ()
    last_seen: str = ""
    tasks_done: int = 0


@_frozen
class AccountUsage(APIObject):
    """What an account uses now, which its quotas bound: its leased tasks
    (``running``), its unfinished jobs (``jobs``) and the bytes of its
    uploads (``storage_bytes``)."""

    running: int = 0
    jobs: int = 0
    storage_bytes: int = 0


@_frozen
class Account(APIObject):
    """An account (``GET /account``): whether it is an ``admin`` or
    ``disabled``, its ``weight`` in the share of workers, its quotas
    ``max_running``, ``max_jobs`` and ``max_storage`` (bytes; 0 is none),
    and ``usage``, what it uses now (None where the coordinator does not
    send it)."""

    _OMITTED_WHEN_NONE = ("usage",)

    name: str = ""
    admin: bool = False
    disabled: bool = False
    weight: int = 1
    max_running: int = 0
    max_jobs: int = 0
    max_storage: int = 0
    created_at: str = ""
    updated_at: str = ""
    usage: Optional[AccountUsage] = None


@_frozen
class Usage(APIObject):
    """One row of ``GET /usage``: the worker time of a group. Only the
    fields of ``by`` are set (the others are None and not among the
    keys); ``day`` is ``YYYY-MM-DD``, ``worker_account`` ``""`` for the
    installation's own workers. ``tasks`` counts the attempts,
    ``worker_seconds`` their leased time."""

    _OMITTED_WHEN_NONE = ("account", "workload", "day", "worker_account")

    account: Optional[str] = None
    workload: Optional[str] = None
    day: Optional[str] = None
    worker_account: Optional[str] = None
    tasks: int = 0
    worker_seconds: float = 0.0
