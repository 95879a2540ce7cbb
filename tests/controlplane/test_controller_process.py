"""The controller as it runs in a cluster: ``python -m txntable``, a kubeconfig with the chart's
ServiceAccount token, the chart's RBAC, against the real API server.

This is the production client path (the kubeconfig Kopf logs in with and the one the handlers'
own client loads), which the kmock tests never took with a token: a status written by the
handlers' client (the commit-events daemon) is refused without one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from kubernetes import client

from tests.controlplane.conftest import TABLES_NAMESPACE
from tests.controlplane.controller import Install
from tests.controlplane.kube import condition, get_table, wait_for
from txntable.engine import Table


def _table(name: str, location: Path) -> dict[str, Any]:
    return {
        "apiVersion": "txntable.io/v1alpha1",
        "kind": "TxnTable",
        "metadata": {"name": name, "namespace": TABLES_NAMESPACE},
        "spec": {"location": str(location), "observeInterval": "1s"},
    }


def test_a_table_becomes_ready_and_a_commit_is_seen_through_the_production_client(
    installed: Install, admin: Any, start_controller: Any, tmp_path: Path
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
