"""SciMesh from Python: submit tables to a coordinator, follow the jobs,
read their results, and write workloads.

    import scimesh
    c = scimesh.Client()            # SCIMESH_COORDINATOR, SCIMESH_TOKEN
    job = c.submit("fps.csv", workload="tanimoto", top_k=100, params={"query": "00ff"})
    job.wait(progress=True)
    df = job.dataframe()

The calls return a ``Job``, or the dataclasses of ``scimesh.types``
(``Upload``, ``Task``, ``Worker``, ...), and lists of them.
A workload command in Python is ``scimesh.run_workload(score)``.
``scimesh.local()`` runs a coordinator and a worker on this machine for
the length of a with block.
"""

__version__ = "0.1.0"

from .client import Client, Job  # noqa: E402
from ._local import local  # noqa: E402
from .errors import APIError, Error, JobFailed, NetworkError, SourceError, Timeout  # noqa: E402
from .types import Account, AccountUsage, Task, TaskCounts, TaskInput, Upload, Usage, Worker, Workload  # noqa: E402
from .workload import WorkloadError, run_workload  # noqa: E402

__all__ = [
    "Client", "Job", "local",
    "Upload", "Task", "TaskInput", "TaskCounts", "Workload", "Worker", "Account", "AccountUsage", "Usage",
    "Error", "APIError", "JobFailed", "NetworkError", "SourceError", "Timeout", "WorkloadError",
    "run_workload", "__version__",
]
