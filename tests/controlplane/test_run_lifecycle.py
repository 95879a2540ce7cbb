"""A table's compaction from start to end on the real API server, on both cluster backends.

TxnTable created -> observed -> ``status.plan`` -> a run launched (a batch Job under the shared
install, a SparkApplication under a release whose default backend is ``sparkapplication``) ->
the test plays the Job controller or the Spark Operator, with scheduler and kubelet: the run's
container is the program the manifest names, run as a local process against the table
(``pod_runner``), and the run's status is written as those controllers write it (the server
validates it) -> the controller reads the run's end and its result line (``GET pods/<driver>/log``
through the API server to the stand-in kubelet) -> status and Events say what happened, and the
table is really compacted (our reader and deltalake agree, no row lost).

A run that fails says why in the table's status: its own error when the driver's log has it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import oracle_read
from tests.controlplane import flows
from tests.controlplane.conftest import SPARK_NAMESPACE, TABLES_NAMESPACE
from tests.controlplane.controller import Install
from tests.controlplane.kube import get_table, wait_for
from tests.controlplane.plane import ControlPlane
from tests.controlplane.standins import JobController, Kubelet
from txntable.engine import Table

ROWS = 120  # flows.fragmented: 12 appends of 10 rows, 24 files in partitions a and b


def _backend(request: pytest.FixtureRequest, backend: str) -> tuple[Install, str, Any]:
    """The install, namespace and stand-in controller of ``backend``."""
    if backend == "job":
        standin = request.getfixturevalue("job_controller")
        return request.getfixturevalue("installed"), TABLES_NAMESPACE, standin
    standin = request.getfixturevalue("spark_operator")
    return request.getfixturevalue("spark_install"), SPARK_NAMESPACE, standin


def _driver_container(backend: str) -> str:
    return "spark-driver" if backend == "job" else "spark-kubernetes-driver"


@pytest.mark.parametrize("backend", ["job", "sparkapplication"])
def test_a_table_is_planned_compacted_by_its_run_and_read_back(
    backend: str,
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    admin: Any,
    kubelet: Kubelet,
    start_controller: Any,
    tmp_path: Path,
) -> None:
    install, ns, standin = _backend(request, backend)
    name = f"lifecycle-{backend}"
    start_controller(install)
    location = flows.fragmented(admin, ns, name, tmp_path)
    before = oracle_read.read(location)

    # observed, then planned: the plan in status is the run's work (2 bins of 12 files)
    plan = flows.wait_plan(admin, ns, name)
    assert (plan["bins"], plan["files"]) == (2, 24), plan
    st = flows.status(admin, ns, name)
    assert (st["version"], st["files"]) == (12, 24), st

    run = flows.the_run(admin, ns, name, backend)
    run_name = run["metadata"]["name"]
    uid = get_table(admin, ns, name)["metadata"]["uid"]
    (owner,) = run["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("TxnTable", name, uid)
    flows.wait_running(admin, ns, name, run_name)

    local = standin.run(run)
    assert local.wait() == 0, local.text()[-3000:]
    result = json.loads(local.text().strip().splitlines()[-1])
    assert (result["numFilesRemoved"], result["numFilesAdded"]) == (24, 2), result

    record = flows.wait_recorded(admin, ns, name, run_name, timeout=120)
    assert record["outcome"] == "Succeeded", record
    assert "commit confirmed in the table log" in record["message"], record
    # the version comes from the run's result line: read through the API server's pods/log
    assert record["version"] == result["version"] == 13, record
    pod = local.name
    assert any(
        r.startswith(f"/containerLogs/{ns}/{pod}/{_driver_container(backend)}")
        for r in kubelet.requests
    ), kubelet.requests
    wait_for(
        f"{name}: the compacted log observed",
        lambda: flows.figures(admin, ns, name, "version", "files") == (13, 2),
    )

    # the table: compacted, every row kept, as our reader and deltalake read it
    snapshot = Table.open(str(location)).snapshot()
    assert (snapshot.version, len(snapshot.files())) == (13, 2)
    after = oracle_read.read(location)
    assert (after["version"], after["rows"], after["digest"]) == (13, ROWS, before["digest"])
    (optimize,) = [h for h in Table.open(str(location)).history() if h["operation"] == "OPTIMIZE"]
    assert optimize["txntableRunId"] == run_name

    events = flows.events_of(admin, ns, name)
    assert flows.reasons(events).count("RunStarted") == 1, flows.reasons(events)
    (succeeded,) = [e for e in events if e.reason == "RunSucceeded"]
    assert run_name in succeeded.message
    # one run: on the server, and created once according to the audit log
    assert flows.run_names(admin, ns, name, backend) == [run_name]
    assert flows.created_runs(control_plane, install.user, backend, ns, name, name) == [run_name]
    # the run's conflict figures (from its result line) are kept for the back-off
    conflicts = wait_for(
        f"{name}: the run's figures in status.conflicts",
        lambda: (flows.status(admin, ns, name).get("conflicts") or {}).get("runs"),
    )
    assert conflicts[0]["runName"] == run_name and conflicts[0]["binsPlanned"] == 2, conflicts
    assert conflicts[0]["binsDropped"] == 0, conflicts
    # every status written (plan, run records, conditions, protocol...) kept whole by the
    # server's structural pruning, and what is read back is the last one written
    flows.assert_status_kept(control_plane, install.user, ns, name)
    flows.wait_read_back(control_plane, admin, install.user, ns, name)
    # Kopf's own writes of the object in its whole life until deleted: its finalizer, once
    # (no handler progress, no copy of the spec in an annotation)
    writes = flows.metadata_writes(control_plane, install.user, ns, "txntables", name)
    assert writes == [["/metadata/finalizers"]], writes
    flows.delete_table(admin, ns, name)


@pytest.mark.parametrize("backend", ["job"])  # the log is read as for a success (above)
def test_a_failed_run_says_the_jobs_own_error(
    backend: str,
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    admin: Any,
    start_controller: Any,
    tmp_path: Path,
) -> None:
    """A policy Z-ordering by a column the table lacks: the job refuses it (exit 2, the table
    unchanged), the backend reports a failure, and the table's status says the job's reason."""
    install, ns, standin = _backend(request, backend)
    name = f"failing-{backend}"
    start_controller(install)
    location = flows.fragmented(admin, ns, name, tmp_path, zOrderBy=["no_such_column"])
    run = flows.the_run(admin, ns, name, backend)
    run_name = run["metadata"]["name"]
    local = standin.run(run)
    assert local.wait() == 2, local.text()[-3000:]
    assert "no_such_column" in local.text()

    record = flows.wait_recorded(admin, ns, name, run_name)
    assert record["outcome"] == "Failed", record
    assert "Z-order column 'no_such_column' is not in the table schema" in record["message"], record
    (failed,) = [e for e in flows.events_of(admin, ns, name) if e.reason == "RunFailed"]
    assert failed.type == "Warning" and "no_such_column" in failed.message, failed.message
    assert flows.compacting(admin, ns, name), flows.status(admin, ns, name)
    assert Table.open(str(location)).version() == 12  # nothing committed
    flows.assert_status_kept(control_plane, install.user, ns, name)
    flows.delete_table(admin, ns, name)


def test_without_a_kubelet_the_log_is_empty_and_the_status_says_only_what_is_known(
    control_plane: ControlPlane,
    admin: Any,
    installed: Install,
    job_controller: JobController,
    start_controller: Any,
    tmp_path: Path,
) -> None:
    """Pods no kubelet serves (unscheduled, as on a control plane alone): the API server answers
    their log with 204 No Content. The run is still recorded from the Job's conditions and the
    table's log, and says nothing it cannot know."""
    ns, name = TABLES_NAMESPACE, "no-kubelet"
    start_controller(installed)
    flows.fragmented(admin, ns, name, tmp_path)
    run = flows.the_run(admin, ns, name, "job")
    run_name = run["metadata"]["name"]
    pod = job_controller.create_pod(run, node=None)  # no scheduler, no kubelet
    url = f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/log?container=spark-driver"
    assert control_plane.get(url) == (204, b"")  # not 400: No Content
    job_controller.finish(run, 0)
    record = flows.wait_recorded(admin, ns, name, run_name)
    # no result line: succeeded by the Job's word, and the table's log has no commit of it
    assert record["outcome"] == "Succeeded", record
    assert "no commit of this run found" in record["message"], record
    assert "version" not in record, record
    flows.delete_table(admin, ns, name)
