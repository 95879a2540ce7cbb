"""Build the launcher for a backend from the operator's configuration and one API client.

The controller calls this once per backend at start-up and keeps the launchers in its memo;
the Kubernetes client is imported only when a cluster backend is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from txntable.api.common import Backend
from txntable.config import Config
from txntable.launch.base import Launcher
from txntable.launch.local import LocalLauncher
from txntable.launch.run import parse_backend


def make_launcher(
    backend: Backend | str,
    config: Config,
    *,
    api_client: Any | None = None,
    runs_dir: Path | None = None,
) -> Launcher:
    """A launcher for ``backend``: cluster ones need ``api_client``, local needs ``runs_dir``."""
    chosen = backend if isinstance(backend, Backend) else parse_backend(backend)
    if chosen is Backend.LOCAL:
        if runs_dir is None:
            raise ValueError("the local backend needs a runs directory")
        return LocalLauncher(runs_dir)
    from kubernetes import client

    from txntable.launch.kubernetes import JobLauncher, SparkApplicationLauncher

    core = client.CoreV1Api(api_client)
    if chosen is Backend.JOB:
        return JobLauncher(client.BatchV1Api(api_client), config, core)
    return SparkApplicationLauncher(client.CustomObjectsApi(api_client), config, core)
