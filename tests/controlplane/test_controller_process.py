"""The controller as it runs in a cluster: ``python -m txntable``, a kubeconfig with the chart's
ServiceAccount token, the chart's RBAC, against the real API server.

This is the production client path (the kubeconfig Kopf logs in with and the one the handlers'
own client loads), which the kmock tests never took with a token: a status written by the
handlers' client (the commit-events daemon) is refused without one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kubernetes import client

from tests.controlplane import flows
from tests.controlplane.conftest import TABLES_NAMESPACE
from tests.controlplane.controller import (
    BASE_IMAGE_ENV,
    DOCKERFILE,
    IMAGE_STAGE,
    REPO,
    ControllerProcess,
    Install,
)
from tests.controlplane.kube import condition, get_table, wait_for
from tests.controlplane.plane import ControlPlane
from tests.dockerfile import parse
from tests.support.manifests import table_manifest
from txntable.engine import Table


def _table(name: str, location: Path) -> dict[str, Any]:
    return table_manifest(name, location, namespace=TABLES_NAMESPACE, observeInterval="1s")


def test_a_table_becomes_ready_and_a_commit_is_seen_through_the_production_client(
    installed: Install,
    admin: Any,
    start_controller: Any,
    tmp_path: Path,
    control_plane: ControlPlane,
) -> None:
    location = tmp_path / "events"
    schema = pa.schema([("id", pa.int64())])
    table = Table.create(str(location), schema)
    table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    controller = start_controller()
    custom = client.CustomObjectsApi(admin)
    custom.create_namespaced_custom_object(
        "txntable.io", "v1alpha1", TABLES_NAMESPACE, "txntables", _table("events", location)
    )

    def ready() -> dict[str, Any] | None:
        obj = get_table(admin, TABLES_NAMESPACE, "events")
        found = condition(obj, "Ready")
        return obj if found and found["status"] == "True" else None

    obj = wait_for("TxnTable events Ready", ready, timeout=90)
    assert obj["status"]["version"] == 1
    # a new commit is announced by the commit-events daemon, whose status patch goes through
    # the handlers' own API client (not Kopf's): it must carry the ServiceAccount's token
    table.append(pa.table({"id": pa.array([3], pa.int64())}))
    wait_for(
        "status.version 2",
        lambda: get_table(admin, TABLES_NAMESPACE, "events")["status"].get("version") == 2,
        timeout=60,
    )
    assert "status of" not in controller.logs(400), controller.logs()
    # Kopf's initial listing of the tables comes in pages (settings.watching.chunk_size), not
    # in one response holding every table (at 10,000 tables, 60 MB of JSON); the start-up
    # count of the tables (handlers.table_index) asks for one
    uris = [
        str(e.get("requestURI"))
        for e in flows.requests_by(control_plane, installed.user, "list", "txntables")
        if "watch=" not in str(e.get("requestURI"))
    ]
    assert any("limit=500" in u for u in uris) and any("limit=1" in u for u in uris), uris
    assert all("limit=" in u for u in uris), uris
    # deleted while the controller runs, so its finalizer goes and nothing is left for others
    custom.delete_namespaced_custom_object(
        "txntable.io", "v1alpha1", TABLES_NAMESPACE, "txntables", "events"
    )
    wait_for(
        "the table deleted",
        lambda: not custom.list_namespaced_custom_object(
            "txntable.io", "v1alpha1", TABLES_NAMESPACE, "txntables",
            field_selector="metadata.name=events",
        )["items"],
        timeout=60,
    )  # fmt: skip


def _environ(pid: int) -> dict[str, str]:
    """The environment process ``pid`` was started with (as the kernel keeps it)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode()
    return dict(item.split("=", 1) for item in raw.split("\0") if item)


def test_the_controller_runs_with_the_images_environment_not_the_tests(
    installed: Install, start_controller: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the kubelet starts the container: the image's ENV (Dockerfile, ``controller``
    stage) under the chart's env, and the kubeconfig standing for the mounted token; the
    image's ENTRYPOINT on the image's PATH; a fresh empty directory for its WORKDIR. Nothing of
    the test process: not its PYTHONPATH, its other variables, or the checkout as working
    directory (what the image lacks, the controller must do without here too)."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("TXNTABLE_SET_BY_THE_TEST_PROCESS", "1")
    controller: ControllerProcess = start_controller()
    pid = controller.proc.pid
    environ = _environ(pid)
    image = parse(DOCKERFILE.read_text()).environment(IMAGE_STAGE, BASE_IMAGE_ENV)
    chart = installed.env(pod="any")
    assert set(environ) == set(image.env) | set(chart) | {"KUBECONFIG"}
    for key, value in chart.items():  # the chart's env wins over the image's
        if key not in ("POD_ID", "TXNTABLE_HEALTH_PORT", "TXNTABLE_METRICS_PORT"):
            assert environ[key] == value, key
    venv = Path(sys.prefix)
    assert environ["PATH"].split(":")[0] == str(venv / "bin")
    cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    assert cwd == controller.cwd and environ["HOME"] == str(cwd)  # WORKDIR and HOME are /tmp
    assert not cwd.is_relative_to(REPO) and not REPO.is_relative_to(cwd)
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
    assert argv == [str(venv / "bin" / "python"), "-m", "txntable"]
