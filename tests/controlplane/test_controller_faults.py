"""The controller through faults on the real API server: its process killed mid-run, a second
replica, the API server restarted under it. In each, a run is launched once and only once.

A run held in flight is a batch Job whose pod exists (created by the stand-in Job controller,
left unscheduled: no container runs) until the test writes its end as the Job controller would.
"Launched once" is read from the API server's audit log: one ``create`` answered 201 for the
table's runs, whatever the controller tried after (a second ``create`` of the same name would be
refused with 409 and adopted).

Catching up is shown by a commit the test adds to the table while the fault lasts: the
controller must come to report the new version in ``status.version``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from kubernetes import client

from tests.controlplane import flows
from tests.controlplane.conftest import TABLES_NAMESPACE
from tests.controlplane.controller import Install
from tests.controlplane.kube import wait_for
from tests.controlplane.plane import ControlPlane
from tests.controlplane.standins import JobController
from txntable.engine import Table

NS = TABLES_NAMESPACE
#: what Kopf logs when it pauses for a peer of its own priority (the first replica also says
#: "Pausing all operators, including self"; the second starts paused and stays so)
SAME_PRIORITY = "Possibly conflicting operators with the same priority"


def _append(location: Path) -> int:
    """One more commit by another writer (10 rows in partition a); the new version."""
    table = Table.open(str(location))
    table.append(
        pa.table(
            {
                "id": pa.array(range(1000, 1010), pa.int64()),
                "part": pa.array(["a"] * 10),
                "v": pa.array([0.5] * 10),
            }
        )
    )
    return Table.open(str(location)).version()


def _a_run_in_flight(
    admin: Any, job_controller: JobController, name: str, root: Path
) -> dict[str, Any]:
    """Table ``name`` created, its compaction launched as a Job and in status as Running, the
    Job's pod created (the Job active): the run as the API server returns it."""
    flows.fragmented(admin, NS, name, root)
    run = flows.the_run(admin, NS, name, "job")
    flows.wait_running(admin, NS, name, run["metadata"]["name"])
    job_controller.create_pod(run, node=None)
    return run


def _caught_up(admin: Any, name: str, version: int) -> None:
    wait_for(
        f"{name}: status.version {version}",
        lambda: flows.status(admin, NS, name).get("version") == version,
        timeout=90,
    )


def _ends_once(
    plane: ControlPlane,
    admin: Any,
    install: Install,
    job_controller: JobController,
    name: str,
    run: dict[str, Any],
) -> None:
    """The Job ends (succeeded); the table records that one run once, and it was created once."""
    run_name = run["metadata"]["name"]
    assert flows.run_names(admin, NS, name, "job") == [run_name]
    job_controller.finish(run, 0)
    record = flows.wait_recorded(admin, NS, name, run_name)
    assert record["outcome"] == "Succeeded", record
    flows.wait_event(admin, NS, name, "RunSucceeded")
    found = flows.reasons(flows.events_of(admin, NS, name))
    assert found.count("RunSucceeded") == 1, found
    assert flows.created_runs(plane, install.user, "job", NS, name, name) == [run_name]
    assert flows.run_names(admin, NS, name, "job") == [run_name]


def test_a_controller_killed_mid_run_adopts_the_run_after_restart(
    control_plane: ControlPlane,
    admin: Any,
    installed: Install,
    job_controller: JobController,
    start_controller: Any,
    tmp_path: Path,
) -> None:
    name = "killed-mid-run"
    proc = start_controller()
    run = _a_run_in_flight(admin, job_controller, name, tmp_path)

    proc.kill()  # SIGKILL: no cleanup, no goodbye to the peering object
    version = _append(tmp_path / name)
    proc.restart()  # in the same pod (its name is Kopf's peering identity, POD_ID)
    _caught_up(admin, name, version)
    # it took the dead process's peering entry for its own: no pause for a peer (before the
    # chart set POD_ID, it paused until that entry expired, a minute)
    after = proc.log.read_text(errors="replace").rpartition("=== restarted")[2]
    assert SAME_PRIORITY not in after and "Pausing operations" not in after, after[-2000:]
    # the restarted controller knows the run from the server: still running, still the one
    record = flows.compaction(admin, NS, name)
    assert (record.get("runName"), record.get("outcome")) == (run["metadata"]["name"], "Running")

    _ends_once(control_plane, admin, installed, job_controller, name, run)
    flows.delete_table(admin, NS, name)


def test_the_api_server_restarted_under_a_running_controller(
    control_plane: ControlPlane,
    admin: Any,
    installed: Install,
    job_controller: JobController,
    start_controller: Any,
    tmp_path: Path,
) -> None:
    """Same port, same etcd: the controller's watches break and its requests fail while the
    server is down; it reconnects, sees what changed meanwhile and what comes after."""
    name = "apiserver-restart"
    proc = start_controller()
    run = _a_run_in_flight(admin, job_controller, name, tmp_path)

    control_plane.restart_apiserver()
    version = _append(tmp_path / name)
    _caught_up(admin, name, version)
    # a table created after the restart is seen (the watch is back) and planned
    later = "after-restart"
    flows.fragmented(admin, NS, later, tmp_path)
    flows.wait_plan(admin, NS, later)
    assert proc.proc.poll() is None and proc.healthy()

    _ends_once(control_plane, admin, installed, job_controller, name, run)
    for table in (name, later):
        flows.delete_table(admin, NS, table)


def test_two_replicas_pause_each_other_and_the_survivor_launches_once(
    control_plane: ControlPlane,
    admin: Any,
    installed: Install,
    job_controller: JobController,
    start_controller: Any,
    tmp_path: Path,
) -> None:
    """Two replicas of the chart's controller (same ServiceAccount, same peering object, Kopf's
    default priority): Kopf pauses both while both are alive (ADR 0005: the chart runs one
    replica with the Recreate strategy), so a table created meanwhile gets no run; once one
    replica stops, the other resumes and launches one run."""
    first = start_controller(name="replica-1")
    second = start_controller(name="replica-2")
    for proc in (first, second):
        wait_for(
            f"{proc.log.name} paused for its peer",
            lambda p=proc: SAME_PRIORITY in p.log.read_text(errors="replace"),
        )
    name = "two-replicas"
    flows.fragmented(admin, NS, name, tmp_path)
    # both paused: over ten observe intervals (1 s), neither observes the table (no status
    # at all) nor launches; a controller that acted would have done both in that time
    time.sleep(10)
    assert flows.status(admin, NS, name) == {}
    assert flows.runs_of(admin, NS, name, "job") == []

    second.stop()  # SIGTERM: Kopf removes itself from the peering object on the way out
    run = flows.the_run(admin, NS, name, "job")
    assert first.proc.poll() is None
    assert "Resuming operations" in first.log.read_text(errors="replace")
    job_controller.create_pod(run, node=None)
    _ends_once(control_plane, admin, installed, job_controller, name, run)
    flows.delete_table(admin, NS, name)


def test_a_table_deleted_while_its_timer_ticks_goes_at_once(
    admin: Any, start_controller: Any, tmp_path: Path
) -> None:
    """Kopf keeps a deleted object's finalizer until its timers have exited; a timer ticking
    in a thread cannot be cancelled, and Kopf looked again only after its default 60 s unless
    another event of the object came first. A tick with nothing new to write brings none, so
    deleting a TxnTable took a minute whenever it landed mid-tick (seen under load in the
    lifecycle flows). Here the tick is held at a pause point while the table is deleted, then
    let go: the table must be gone within seconds, not a minute."""
    name = "deleted-mid-tick"
    marker = tmp_path / "tick.paused"
    start_controller(
        env={
            "TXNTABLE_TEST_PAUSE_AT": "controller:tick",
            "TXNTABLE_TEST_PAUSE_MARKER": str(marker),
            "TXNTABLE_TEST_PAUSE_RESUME": "1",
        }
    )
    # never due: the table is observed and planned, nothing is launched, the status settles
    flows.fragmented(admin, NS, name, tmp_path, triggers={"smallFiles": 100000})
    seen: list[dict[str, Any]] = []

    def settled() -> bool:  # every paused tick let go until two ticks leave the status alone
        if marker.exists():
            marker.unlink()
            seen.append(flows.status(admin, NS, name))
        return len(seen) >= 3 and "plan" in seen[-1] and seen[-1] == seen[-2] == seen[-3]

    wait_for(f"{name}: a settled status", settled, timeout=120, every=0.05)
    wait_for(f"{name}: a tick held", marker.exists, timeout=60, every=0.05)
    client.CustomObjectsApi(admin).delete_namespaced_custom_object(
        flows.GROUP, flows.VERSION, NS, "txntables", name
    )
    time.sleep(3)  # Kopf sees the deletion; the held tick may be the timer's or the daemon's
    # (ADR 0009: each table's daemon keeps its schedule). Kopf waits for a timer's thread, not
    # for a cancelled daemon's, so the table may be gone already; either way it must go within
    # seconds of the tick's end, not Kopf's default 60 s.
    marker.unlink()  # the tick ends, with nothing to write
    flows.delete_table(admin, NS, name, timeout=30)
