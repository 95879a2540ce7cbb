"""Launch layer: start maintenance runs and follow them, whatever the backend.

One interface (``Launcher``) with three backends: ``SparkApplicationLauncher`` and
``JobLauncher`` (``txntable.launch.kubernetes``, which imports the Kubernetes client) and
``LocalLauncher``; pure manifest builders in ``manifests``; deterministic names in ``names``;
history limits and retry backoff as pure functions; the RBAC the launchers need in
``permissions``. Imports ``txntable.api`` constants and ``txntable.config``, never the engine.
"""

from txntable.api.common import Backend, RunKind
from txntable.launch.backoff import Backoff
from txntable.launch.base import Launcher
from txntable.launch.errors import (
    LaunchError,
    PermanentLaunchError,
    RunNotFoundError,
    TransientLaunchError,
)
from txntable.launch.factory import make_launcher
from txntable.launch.history import runs_to_delete
from txntable.launch.local import LocalLauncher
from txntable.launch.names import attempt_of, run_name
from txntable.launch.run import Resources, RunRequest, RunState, RunStatus

__all__ = [
    "Backend",
    "Backoff",
    "LaunchError",
    "Launcher",
    "LocalLauncher",
    "PermanentLaunchError",
    "Resources",
    "RunKind",
    "RunNotFoundError",
    "RunRequest",
    "RunState",
    "RunStatus",
    "TransientLaunchError",
    "attempt_of",
    "make_launcher",
    "run_name",
    "runs_to_delete",
]
