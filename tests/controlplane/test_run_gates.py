"""What holds a run back or stops it, on the real API server: approval of the plan, a
permission the controller lost, the table deleted while its run is active, a run that lost
to another writer (conflict back-off).

Runs are batch Jobs of the shared install (or of a release of the chart of this module's own);
their end is written by the stand-in Job controller without running a container (what these
flows show is the controller's part, not the compaction: ``test_run_lifecycle`` does that),
except in the conflict back-off, where the job really runs and really loses a bin.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kubernetes import client

from tests.controlplane import flows
from tests.controlplane.conftest import INSTALL_VALUES, TABLES_NAMESPACE
from tests.controlplane.controller import Install, install_chart
from tests.controlplane.kube import apply, get_table, wait_for
from tests.controlplane.plane import ControlPlane
from tests.controlplane.standins import JobController
from tests.support.kmock_controller import data_and_commits
from txntable.api.constants import ANNOTATION_APPROVE_PLAN
from txntable.engine import Table, testhooks
from txntable.engine.commit.transaction import CommitOptions, Transaction

NS = TABLES_NAMESPACE
RBAC_NAMESPACE = "txntable-rbac-tables"


def _approve(admin: Any, name: str, plan_id: str) -> None:
    """Annotate TxnTable ``name`` as a user approving plan ``plan_id``."""
    body = {"metadata": {"annotations": {ANNOTATION_APPROVE_PLAN: plan_id}}}
    client.CustomObjectsApi(admin).patch_namespaced_custom_object(
        flows.GROUP, flows.VERSION, NS, "txntables", name, body
    )


def test_a_plan_that_needs_approval_runs_once_annotated_with_its_id(
    control_plane: ControlPlane,
    admin: Any,
    installed: Install,
    job_controller: JobController,
    start_controller: Any,
    tmp_path: Path,
) -> None:
    name = "approval"
    start_controller()
    flows.fragmented(admin, NS, name, tmp_path, requireApproval=True)
    plan_id = flows.wait_plan(admin, NS, name)["planId"]
    held = flows.wait_compacting(admin, NS, name, "AwaitingApproval")
    assert f"{ANNOTATION_APPROVE_PLAN}={plan_id}" in held["message"], held
    flows.wait_event(admin, NS, name, "AwaitingApproval")
    assert flows.runs_of(admin, NS, name, "job") == []

    # an id that is not the plan's approves nothing
    _approve(admin, name, "not-the-plan")
    wait_for(
        f"{name}: the wrong id named in Compacting",
        lambda: "not-the-plan" in flows.compacting(admin, NS, name).get("message", ""),
    )
    assert flows.runs_of(admin, NS, name, "job") == []

    _approve(admin, name, plan_id)
    run = flows.the_run(admin, NS, name, "job")
    job_controller.create_pod(run, node=None)
    job_controller.finish(run, 0)
    record = flows.wait_recorded(admin, NS, name, run["metadata"]["name"])
    assert record["outcome"] == "Succeeded", record
    assert flows.created_runs(control_plane, installed.user, "job", NS, name, name) == [
        run["metadata"]["name"]
    ]
    flows.assert_status_kept(control_plane, installed.user, NS, name)
    flows.delete_table(admin, NS, name)


def test_deleting_a_table_while_its_run_is_active_stops_the_run_and_keeps_the_data(
    admin: Any,
    installed: Install,
    job_controller: JobController,
    start_controller: Any,
    tmp_path: Path,
) -> None:
    """Kopf's finalizer holds the TxnTable until the controller has deleted its runs (no
    garbage collector runs here: what is deleted, the controller deleted)."""
    name = "deleted-mid-run"
    start_controller()
    location = flows.fragmented(admin, NS, name, tmp_path)
    files = data_and_commits(location)
    run = flows.the_run(admin, NS, name, "job")
    job_controller.create_pod(run, node=None)
    assert "txntable.io/finalizer" in get_table(admin, NS, name)["metadata"]["finalizers"]

    flows.delete_table(admin, NS, name)
    assert flows.runs_of(admin, NS, name, "job") == []
    assert data_and_commits(location) == files


@pytest.fixture(scope="module")
def rbac_install(
    control_plane: ControlPlane, installed: Install, tmp_path_factory: pytest.TempPathFactory
) -> Install:
    """A release of the chart of this module's own (its Role is changed by the test)."""
    values = copy.deepcopy(INSTALL_VALUES)
    values["watch"] = {"namespaces": [RBAC_NAMESPACE]}
    values["crds"] = {"create": False}  # the shared install's
    return install_chart(
        control_plane,
        tmp_path_factory.mktemp("rbac-install"),
        release="txntable-rbac",
        namespace="txntable-rbac-system",
        values=values,
    )


def _tables_role(install: Install) -> dict[str, Any]:
    (role,) = [
        r
        for r in install.of_kind("Role")
        if r["metadata"]["namespace"] == RBAC_NAMESPACE
        and any("jobs" in rule.get("resources", ()) for rule in r["rules"])
    ]
    return role


def _without_create_jobs(role: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(role)
    for rule in out["rules"]:
        if "jobs" in rule.get("resources", ()):
            rule["verbs"] = [v for v in rule["verbs"] if v != "create"]
    return out


def _refused_creates(plane: ControlPlane, user: str, ns: str) -> list[dict[str, Any]]:
    """The audit events of ``user``'s creates of Jobs in ``ns`` that the authorizer refused."""
    return [
        e
        for e in flows.requests_by(plane, user, "create", "jobs", ns)
        if e["responseStatus"]["code"] == 403
    ]


def test_a_lost_permission_is_a_condition_and_an_event_not_a_crash(
    control_plane: ControlPlane,
    admin: Any,
    rbac_install: Install,
    job_controller: JobController,
    start_controller: Any,
    tmp_path: Path,
) -> None:
    """``create`` on Jobs taken out of the chart's Role: the run is refused with 403 by the
    real authorizer; the table says so in one Warning Event and its Compacting condition, the
    controller keeps serving (alive, healthy, other work done) and tries again after a growing
    back-off (``TXNTABLE_PERMISSION_RETRY_SECONDS``, 1 s here: 1, 2, 4 ... up to 30 s). The
    verb given back, the same process starts the run, once, and says the refusal no more."""
    ns, name = RBAC_NAMESPACE, "no-create-jobs"
    role = _tables_role(rbac_install)
    apply(admin, _without_create_jobs(role))
    proc = start_controller(rbac_install, env={"TXNTABLE_PERMISSION_RETRY_SECONDS": "1"})
    flows.fragmented(admin, ns, name, tmp_path)

    rejected = wait_for(
        f"{name}: a Warning Event about the refused run",
        lambda: [e for e in flows.events_of(admin, ns, name) if e.type == "Warning"],
    )
    said = " ".join(e.message for e in rejected)
    assert "403" in said and "jobs" in said, said
    # the status says no run started, and why (not Compacting, no run recorded as running)
    held = wait_for(
        f"{name}: Compacting says why no run started",
        lambda: (c := flows.compacting(admin, ns, name)) and "403" in c.get("message", "") and c,
        timeout=30,
    )
    assert held["status"] == "False", held
    assert flows.compaction(admin, ns, name).get("outcome") != "Running"
    refused = _refused_creates(control_plane, rbac_install.user, ns)
    assert refused, "no refused create in the audit log"
    # still serving: alive, healthy, and the table observed (its plan in status)
    assert proc.proc.poll() is None and proc.healthy()
    assert flows.status(admin, ns, name).get("plan")

    # tried again by itself (the audit log shows more refused creates), said once
    wait_for(
        f"{name}: the refused create tried again",
        lambda: len(_refused_creates(control_plane, rbac_install.user, ns)) > len(refused),
    )
    # the verb given back (as an RBAC fix does), the same process (no restart): one run
    apply(admin, role)
    run = flows.the_run(admin, ns, name, "job")
    assert flows.created_runs(control_plane, rbac_install.user, "job", ns, name, name) == [
        run["metadata"]["name"]
    ]
    assert proc.proc.poll() is None  # the process that was refused
    warnings = [e for e in flows.events_of(admin, ns, name) if e.reason == "RunRejected"]
    assert len(warnings) == 1 and (warnings[0].count or 1) == 1, warnings
    flows.delete_table(admin, ns, name)


def _delete_partition(location: Path, value: str) -> int:
    """Another writer's commit: every file of partition ``part=value`` removed (a DELETE of
    the partition, as an engine drops whole files); the version it committed."""
    table = Table.open(str(location))
    snapshot = table.snapshot()
    txn = Transaction(table, snapshot, CommitOptions())
    now = int(time.time() * 1000)
    gone = [a for a in snapshot.add_actions() if a.partition_values.get("part") == value]
    txn.add(*(a.to_remove(now, True) for a in gone))
    return int(txn.commit("DELETE", {"predicate": f"part = '{value}'"}).version)


def test_a_run_that_loses_to_another_writer_backs_the_next_one_off(
    control_plane: ControlPlane,
    admin: Any,
    installed: Install,
    job_controller: JobController,
    start_controller: Any,
    tmp_path: Path,
) -> None:
    """The run's container (the real job, as its Job names it) is held after rewriting its two
    bins (``txntable.engine.testhooks``: the one thing a test adds to its environment) while
    another writer deletes partition a; let go, the job drops that bin and commits the other.
    Its result line, read through the API server, says 1 of 2 bins dropped: over the policy's
    50 %, so the table backs off, in status (kept whole by the server) and an Event."""
    name = "conflicting"
    start_controller()
    back_off = {"conflictPercent": 50, "runs": 1, "initialDelay": "1h", "maxDelay": "2h"}
    location = flows.fragmented(admin, NS, name, tmp_path, avoidRecentWrites={"backOff": back_off})
    run = flows.the_run(admin, NS, name, "job")
    run_name = run["metadata"]["name"]
    marker = tmp_path / "rewritten"
    pause = {
        testhooks.PAUSE_ENV: "optimize:rewritten",
        testhooks.MARKER_ENV: str(marker),
        testhooks.RESUME_ENV: "1",
    }
    local = job_controller.start(run, test_env=pause)
    wait_for("the job paused after its rewrite", marker.exists, timeout=300, every=0.5)
    assert _delete_partition(location, "a") == 13
    marker.unlink()
    code = local.wait()
    job_controller.finish(run, code)
    assert code == 0, local.text()[-3000:]
    result = flows.json_result(local.text())
    assert (result["binsPlanned"], result["binsCommitted"]) == (2, 1), result

    record = flows.wait_recorded(admin, NS, name, run_name)
    assert record["outcome"] == "Succeeded" and record["version"] == 14, record
    conflicts = wait_for(
        f"{name}: the back-off in status.conflicts",
        lambda: (
            (c := flows.status(admin, NS, name).get("conflicts") or {}).get("backOffUntil") and c
        ),
    )
    assert conflicts["percent"] == 50, conflicts
    (figures,) = conflicts["runs"]
    assert (figures["runName"], figures["binsPlanned"], figures["binsDropped"]) == (
        run_name,
        2,
        1,
    ), figures
    # partition b compacted by the run, partition a gone with the other writer's DELETE
    snapshot = Table.open(str(location)).snapshot()
    assert (snapshot.version, len(snapshot.files())) == (14, 1)
    # new small files make a compaction due again: the back-off holds it
    for i in range(2):
        Table.open(str(location)).append(
            pa.table(
                {
                    "id": pa.array([2000 + i], pa.int64()),
                    "part": pa.array(["b"]),
                    "v": pa.array([1.0]),
                }
            )
        )
    held = flows.wait_compacting(admin, NS, name, "ConflictBackOff")
    assert held["status"] == "False", held
    flows.wait_event(admin, NS, name, "ConflictBackOff")
    assert flows.run_names(admin, NS, name, "job") == [run_name]
    flows.assert_status_kept(control_plane, installed.user, NS, name)
    flows.delete_table(admin, NS, name)
