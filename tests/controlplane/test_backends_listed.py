"""The controller asks the API only for the kinds of run its tables' policies use (issue 33.5).

A cluster without the Spark Operator has no SparkApplication kind: every request for
``sparkapplications`` is a 404. On a control plane of its own (the session's gets the Spark
Operator's CRDs from other tests), without that CRD, two releases of the chart run a table whose
runs are batch Jobs, through a compaction run and the table's deletion (the controller deletes
the run it stops):

* ``default-sparkapplication``: the chart's default backend (``sparkapplication``) and a
  CompactionPolicy naming ``Job``, no CheckpointPolicy. The missing policy's kind used to add the
  default backend to the runs listed, so every tick listed SparkApplications;
* ``default-job``: ``defaultBackend: job`` and a policy naming none. Deleting the table used to
  list the runs of every backend.

The audit log must show no request for ``sparkapplications`` by either controller, and the
listings of Jobs that prove the ticks and the deletion ran.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import flows
from tests.controlplane.conftest import started_plane
from tests.controlplane.controller import ControllerProcess, Install, install_chart
from tests.controlplane.kube import wait_for
from tests.controlplane.plane import ControlPlane

#: (chart values' config, the policy's spark template) of each case
CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "default-sparkapplication": ({}, {"backend": "Job"}),
    "default-job": ({"defaultBackend": "job"}, {}),
}
#: ticks of the table seen after its run was created, before it is deleted
TICKS = 5


@pytest.fixture(scope="module")
def plane_without_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with started_plane(tmp_path_factory.mktemp("no-spark-logs")) as plane:
        yield plane


def _install(plane: ControlPlane, workdir: Path, case: str, first: bool) -> Install:
    config, _ = CASES[case]
    values: dict[str, Any] = {
        "watch": {"namespaces": [f"{case}-tables"]},
        "config": {"observeIntervalSeconds": 1, "logFormat": "text", **config},
    }
    if not first:
        values["crds"] = {"create": False}
    return install_chart(
        plane, workdir, release=f"rel-{case}", namespace=f"{case}-system", values=values
    )


def _requests(plane: ControlPlane, user: str, resource: str) -> list[tuple[str, int]]:
    return [
        (str(e.get("verb")), int(e.get("responseStatus", {}).get("code") or 0))
        for e in plane.audit_events()
        if e.get("user", {}).get("username") == user
        and (e.get("objectRef") or {}).get("resource") == resource
    ]


@pytest.mark.parametrize("case", list(CASES))
def test_no_request_for_a_backend_no_policy_uses(
    plane_without_spark: ControlPlane, tmp_path: Path, case: str
) -> None:
    plane = plane_without_spark
    admin = plane.client()
    crds = [c.metadata.name for c in _crds(admin)]
    assert not [c for c in crds if c.startswith("sparkapplications.")], crds
    install = _install(plane, tmp_path / "install", case, first=case == next(iter(CASES)))
    proc = ControllerProcess.start(plane, install, tmp_path / "controller")
    try:
        ns, name = f"{case}-tables", "t"
        _, spark = CASES[case]
        flows.fragmented(admin, ns, name, tmp_path, spark=spark)
        run = flows.the_run(admin, ns, name, "job")["metadata"]["name"]
        before = len(_lists_of_jobs(plane, install, ns))
        wait_for(
            f"{TICKS} listings of {name}'s runs after its run was created",
            lambda: len(_lists_of_jobs(plane, install, ns)) >= before + TICKS,
            timeout=120,
        )
        flows.delete_table(admin, ns, name)
        deleted = [
            e
            for e in flows.requests_by(plane, install.user, "delete", "jobs", ns)
            if e["objectRef"].get("name") == run
        ]
        assert deleted, "the controller did not stop the table's run on deletion"
    finally:
        proc.stop()
    assert _requests(plane, install.user, "sparkapplications") == []


def _lists_of_jobs(plane: ControlPlane, install: Install, ns: str) -> list[dict[str, Any]]:
    return flows.requests_by(plane, install.user, "list", "jobs", ns)


def _crds(admin: Any) -> list[Any]:
    from kubernetes import client

    return list(client.ApiextensionsV1Api(admin).list_custom_resource_definition().items)
