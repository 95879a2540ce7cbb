"""The Kopf controller in-process against kmock's Kubernetes emulator, with real tables and Spark.

A TxnTable and its policies are "applied" to the emulator; the controller observes the local
table, creates a SparkApplication for the compaction, and a stand-in for the Spark Operator runs
that application for real (the job module with the manifest's arguments, Spark in local mode)
and reports its state the way the Spark Operator does. The checks are end to end: the table is
compacted (deltalake counts the files), a checkpoint is written inline, and the TxnTable status
says so. Plus: a controller restart mid-run adopts the running SparkApplication instead of
launching a second one; an invalid spec and unreachable storage become conditions; deleting the
TxnTable stops its runs and leaves the table untouched.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from tests.support.kmock_controller import (
    COMPACTION,
    SPARKAPPS,
    TABLES,
    apply,
    data_and_commits,
    fragmented_table,
    manifests,
    metrics_text,
    operate_until,
    register_resources,
    spark_apps,
    status,
)
from txntable.engine import Table

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.asyncio]


REPO = Path(__file__).resolve().parents[2]


class SparkOperatorStandIn:
    """Runs each new SparkApplication's job for real, then reports COMPLETED/FAILED."""

    def __init__(self, kmock: Any, hold: threading.Event | None = None) -> None:
        self.kmock = kmock
        self.hold = hold  # while set, applications stay RUNNING (to test restarts)
        self.ran: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> SparkOperatorStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)

    def _set_state(self, name: str, state: str) -> None:
        obj = self.kmock.objects[SPARKAPPS, "default", name]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = {"applicationState": {"state": state}, "lastSubmissionAttemptTime": now}
        if state in ("COMPLETED", "FAILED"):
            status["terminationTime"] = now
        obj["status"] = status

    def _loop(self) -> None:
        while not self.stop.is_set():
            for app in spark_apps(self.kmock):
                name = app["metadata"]["name"]
                if name in self.ran:
                    continue
                self.ran.append(name)
                self._set_state(name, "RUNNING")
                while self.hold is not None and self.hold.is_set() and not self.stop.is_set():
                    time.sleep(0.2)
                if not any(a["metadata"]["name"] == name for a in spark_apps(self.kmock)):
                    continue  # deleted while pending: the Spark Operator kills the driver
                self._set_state(name, "COMPLETED" if self._run(app) == 0 else "FAILED")
            time.sleep(0.3)

    def _run(self, app: dict[str, Any]) -> int:
        spec = app["spec"]
        kind = Path(spec["mainApplicationFile"]).stem  # .../jobs/optimize.py -> optimize
        env = {
            **os.environ,
            # what spark-submit and the Spark image provide in a cluster
            "PYSPARK_SUBMIT_ARGS": "--master local[2] pyspark-shell",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
        for item in spec.get("driver", {}).get("env", []):
            if "value" in item:
                env[item["name"]] = item["value"]
        proc = subprocess.run(
            [sys.executable, "-m", f"txntable.jobs.{kind}", *spec.get("arguments", [])],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=REPO,
            check=False,
        )
        if proc.returncode != 0:
            print(proc.stdout[-2000:], proc.stderr[-4000:])
        return proc.returncode


async def test_fragmented_table_is_compacted_and_checkpointed(kmock: Any, tmp_path: Path) -> None:
    location = tmp_path / "events"
    fragmented_table(location)
    before = len(DeltaTable(str(location)).file_uris())
    register_resources(kmock)
    apply(kmock, manifests(str(location)))

    scraped: list[str] = []

    def healed() -> bool:
        st = status(kmock)
        comp = st.get("lastCompaction") or {}
        ckpt = st.get("lastCheckpoint") or {}
        done = (
            comp.get("outcome") == "Succeeded"
            and ckpt.get("outcome") == "Succeeded"
            and st.get("files") == 2
        )
        if done:
            scraped.append(metrics_text())  # while the controller still serves /metrics
        return done

    with SparkOperatorStandIn(kmock) as standin:
        assert await operate_until(kmock, healed), status(kmock)
    assert len(standin.ran) == 1
    after = DeltaTable(str(location))
    assert (before, len(after.file_uris())) == (24, 2)
    assert after.to_pyarrow_table().num_rows == 120  # no row lost or duplicated
    st = status(kmock)
    assert st["version"] == after.version()
    assert "confirmed in the table log" in st["lastCompaction"]["message"]
    assert (location / "_delta_log" / "_last_checkpoint").exists()
    conditions = {c["type"]: c for c in st["conditions"]}
    assert conditions["Reachable"]["status"] == "True"
    assert conditions["PolicyResolved"]["status"] == "True"
    history = Table.open(str(location)).history()
    optimize = [h for h in history if h.get("operation") == "OPTIMIZE"]
    assert optimize and optimize[0]["txntableRunId"] == standin.ran[0]
    assert optimize[0]["isolationLevel"] == "SnapshotIsolation"
    assert 'txntable_table_files{namespace="default",table="events"} 2.0' in scraped[0]
    runs = 'txntable_maintenance_runs_total{kind="optimize",namespace="default",outcome="succeeded"'
    assert runs in scraped[0]


async def test_restart_mid_run_adopts_the_running_application(kmock: Any, tmp_path: Path) -> None:
    location = tmp_path / "events"
    fragmented_table(location)
    register_resources(kmock)
    apply(kmock, manifests(str(location)))
    hold = threading.Event()
    hold.set()
    with SparkOperatorStandIn(kmock, hold) as standin:

        def running() -> bool:
            comp = status(kmock).get("lastCompaction") or {}
            return comp.get("outcome") == "Running" and len(standin.ran) == 1

        assert await operate_until(kmock, running), status(kmock)
        first = status(kmock)["lastCompaction"]["runName"]
        # The controller stopped; a new one starts while the run is still going.
        seen: dict[str, Any] = {}

        def finished() -> bool:
            comp = status(kmock).get("lastCompaction") or {}
            seen["apps"] = len(spark_apps(kmock))
            if comp.get("outcome") == "Running" and time.monotonic() > seen.setdefault(
                "release", time.monotonic() + 3
            ):
                hold.clear()
            return comp.get("outcome") == "Succeeded"

        assert await operate_until(kmock, finished), status(kmock)
    assert status(kmock)["lastCompaction"]["runName"] == first
    assert len(spark_apps(kmock)) == 1 and standin.ran == [first]


async def test_invalid_spec_and_unreachable_storage_become_conditions(
    kmock: Any, tmp_path: Path
) -> None:
    register_resources(kmock)
    docs = manifests(str(tmp_path / "does-not-exist" / "events"))
    apply(kmock, docs)
    bad = {
        **docs["table"],
        "metadata": {**docs["table"]["metadata"], "name": "broken", "uid": "uid-broken"},
        "spec": {**docs["table"]["spec"], "location": "ftp://nowhere/x"},
    }
    kmock.objects[TABLES, "default", "broken"] = bad

    def observed() -> bool:
        reach = {c["type"]: c for c in status(kmock).get("conditions", [])}.get("Reachable")
        broken = dict(kmock.objects[TABLES, "default", "broken"].get("status") or {})
        return bool(reach) and broken.get("phase") == "Invalid"

    assert await operate_until(kmock, observed, timeout=60)
    st = status(kmock)
    reach = {c["type"]: c for c in st["conditions"]}["Reachable"]
    assert reach["status"] == "False" and reach["reason"] in ("StorageUnreachable", "TableNotFound")
    assert st["phase"] == "Unreachable"
    broken = dict(kmock.objects[TABLES, "default", "broken"]["status"])
    valid = {c["type"]: c for c in broken["conditions"]}["SpecValid"]
    assert valid["status"] == "False" and "location" in valid["message"]
    assert not spark_apps(kmock)


async def test_deleting_a_table_stops_its_runs_and_keeps_the_data(
    kmock: Any, tmp_path: Path
) -> None:
    location = tmp_path / "events"
    fragmented_table(location)
    files_before = data_and_commits(location)
    register_resources(kmock)
    apply(kmock, manifests(str(location)))
    hold = threading.Event()
    hold.set()
    with SparkOperatorStandIn(kmock, hold):
        assert await operate_until(kmock, lambda: len(spark_apps(kmock)) == 1)
        table = kmock.objects[TABLES, "default", "events"]
        assert "txntable.io/finalizer" in str(table["metadata"].get("finalizers")) or table[
            "metadata"
        ].get("finalizers")

        def gone() -> bool:
            return (TABLES, "default", "events") not in kmock.objects and not spark_apps(kmock)

        async def delete_then_wait() -> bool:
            import aiohttp

            async with aiohttp.ClientSession() as session:
                base = str(kmock.url).rstrip("/")
                url = f"{base}/apis/txntable.io/v1alpha1/namespaces/default/txntables/events"
                async with session.delete(url) as response:
                    assert response.status < 300
            return await operate_until(kmock, gone, timeout=60)

        assert await delete_then_wait()
        hold.clear()
    # The compaction was stopped before it ran: no data file and no commit changed.
    assert data_and_commits(location) == files_before


async def test_large_log_checkpoint_runs_as_a_spark_application(kmock: Any, tmp_path: Path) -> None:
    location = tmp_path / "events"
    fragmented_table(location)
    register_resources(kmock)
    docs = manifests(str(location), small_files=10_000)  # no compaction: only the checkpoint
    docs["checkpoint"]["spec"]["mode"] = "Spark"
    apply(kmock, docs)

    def checkpointed() -> bool:
        ckpt = status(kmock).get("lastCheckpoint") or {}
        return (
            ckpt.get("outcome") == "Succeeded" and status(kmock).get("commitsSinceCheckpoint") == 0
        )

    with SparkOperatorStandIn(kmock) as standin:
        assert await operate_until(kmock, checkpointed), status(kmock)
    assert len(standin.ran) == 1 and standin.ran[0].startswith("ckpt-")
    assert status(kmock)["lastCheckpoint"]["runName"] == standin.ran[0]
    assert Table.open(str(location)).snapshot().checkpoint_version == 12
    assert len(DeltaTable(str(location)).file_uris()) == 24  # a checkpoint changes no data


async def test_policy_status_reports_matched_tables(kmock: Any, tmp_path: Path) -> None:
    register_resources(kmock)
    apply(kmock, manifests(str(tmp_path / "not-created-yet")))

    def matched() -> bool:
        try:
            st = dict(kmock.objects[COMPACTION, "default", "compact"].get("status") or {})
        except KeyError:
            return False
        return st.get("matchedTables") == ["events"]

    # usually within 2 s; under kmock the first policy event sometimes arrives ~70 s late
    assert await operate_until(kmock, matched, timeout=180), dict(
        kmock.objects[COMPACTION, "default", "compact"]
    )
    st = dict(kmock.objects[COMPACTION, "default", "compact"]["status"])
    assert st["phase"] == "Active" and st["matchedTableCount"] == 1
