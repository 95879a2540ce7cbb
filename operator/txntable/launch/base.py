"""The one interface every launch backend implements (SparkApplication, Job, local process).

The controller only talks to ``Launcher``: it never needs to know where a run executes. Every
method is idempotent and safe to repeat after a crash:

- ``launch(req)`` creates the run named ``req.name``; if it already exists (HTTP 409, or the
  run directory of a local run) the existing run is adopted and returned with
  ``adopted=True``. An object of that name that txntable does not manage is an error.
- ``status(namespace, name)`` reads the run's state, message, times and, once finished, the
  job's JSON result line when the backend can see the output. Raises ``RunNotFoundError``.
- ``delete(namespace, name)`` stops and removes the run; deleting a missing run is a no-op.
- ``list_runs(namespace, table)`` lists the table's runs (for history limits, concurrency
  checks and re-adoption after a controller restart).

Errors are those of ``txntable.launch.errors``: transient ones are retried with backoff by
the caller, permanent ones become conditions.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from txntable.api.common import Backend
from txntable.api.constants import LABEL_MANAGED_BY, LABEL_RUN, MANAGED_BY
from txntable.launch.errors import PermanentLaunchError
from txntable.launch.run import RunRequest, RunStatus


class Launcher(ABC):
    """Start, observe, stop and list maintenance runs on one backend."""

    backend: Backend

    @abstractmethod
    def launch(self, req: RunRequest) -> RunStatus:
        """Create the run (or adopt the existing one of the same name)."""

    @abstractmethod
    def status(self, namespace: str, name: str) -> RunStatus:
        """The run's current state."""

    @abstractmethod
    def delete(self, namespace: str, name: str) -> None:
        """Stop and remove the run; a missing run is not an error."""

    @abstractmethod
    def list_runs(self, namespace: str, table: str) -> list[RunStatus]:
        """Every run of ``table`` in ``namespace`` that this backend knows, oldest first."""

    def waiting(self, namespace: str, name: str) -> str:
        """Why a pod of run ``name`` cannot start (empty: none known). A run in flight can wait
        for ever on an image no registry gives, a request no node fits or a Secret that does
        not exist; Kubernetes says so only on the pods."""
        return ""


def check_adoptable(existing: RunStatus, req: RunRequest) -> None:
    """Refuse to adopt an object that has the run's name but is not this txntable run."""
    labels = existing.labels
    if labels.get(LABEL_MANAGED_BY) != MANAGED_BY or labels.get(LABEL_RUN) != req.name:
        raise PermanentLaunchError(
            f"{existing.namespace}/{existing.name} exists but is not managed by txntable",
            reason="NameTaken",
        )
    for key, value in req.labels.items():
        if labels.get(key) != value:
            raise PermanentLaunchError(
                f"{existing.namespace}/{existing.name} belongs to another run "
                f"({key}={labels.get(key)!r}, expected {value!r})",
                reason="NameTaken",
            )
