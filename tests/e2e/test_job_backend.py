"""The act the product exists for, on a real node: a policy makes a Job, the Job's pod runs
spark-submit against the API server, Spark's Kubernetes backend starts two executor pods that
connect to the driver by pod IP, the run commits to S3 (moto in a pod), and the run's pods go.

Then the same for a checkpoint run and a VACUUM run. Every figure of the run (when the policy
fired, the Job was created, the driver and the executors started, the commit landed, the pods
went) is printed in the report's "figures" section.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pyarrow as pa
import pytest

from tests.e2e import lake
from tests.e2e.lake import BUCKET, TABLES, Install, Timeline
from tests.e2e.store import Store
from tests.e2e.support import Kube, wait_until
from txntable.engine import Table

pytestmark = pytest.mark.e2e

#: executors small enough that a driver and two executors fit the node's two cores
SPARK: dict[str, Any] = {
    "backend": "Job",
    "driver": {"cores": 1, "memory": "1Gi"},
    "executor": {"instances": 2, "cores": 1, "memory": "1Gi"},
    "sparkConf": {"spark.kubernetes.executor.request.cores": "200m"},
    "autoSize": {"enabled": False},
}


def _table(store: Store, name: str, uri: str, **spec: Any) -> dict[str, Any]:
    return lake.custom(
        "TxnTable",
        TABLES,
        name,
        {
            "location": uri,
            "storage": {
                "options": store.table_options(),
                "secretRef": {"name": "lake-credentials"},
            },
            "observeInterval": "5s",
            **spec,
        },
    )


def _executors(kube: Kube, run: str) -> list[dict[str, Any]]:
    return [
        p
        for p in lake.pods_of(kube, TABLES, "spark-role=executor")
        if p["metadata"]["name"].startswith(run)
    ]


def test_a_compaction_policy_makes_one_job_whose_executors_meet_the_driver(
    kube: Kube, store: Store, operator: Install, delta_spark: Any, figures: Any, made: list[str]
) -> None:
    uri = lake.fragment(store, BUCKET, "events")
    before = lake.read_rows(store, uri)
    assert (before["version"], lake.files_of(store, uri)) == (12, 24)
    timeline = Timeline()
    timeline.mark("policy applied")
    made.append("events")
    kube.apply(
        lake.custom("CompactionPolicy", TABLES, "small-files", {
            "targetFileSize": "64Mi", "minFileSize": "8Mi",
            "triggers": {"smallFiles": 2, "cooldown": "1h"},
            "successfulRunsHistoryLimit": 1,
            "spark": SPARK,
        }),
        _table(store, "events", uri, compactionPolicyRef={"name": "small-files"}),
    )  # fmt: skip

    (job,) = wait_until("the table's Job", lambda: lake.runs_of(kube, TABLES, "events"), 300)
    run = job["metadata"]["name"]
    timeline.mark("Job created", lake.parse_time(job["metadata"]["creationTimestamp"]))

    def driver() -> dict[str, Any] | None:
        pods = lake.pods_of(kube, TABLES, f"job-name={run}")
        return pods[0] if pods and lake.started_at(pods[0]) else None

    timeline.mark("driver Running", lake.started_at(wait_until("driver running", driver, 300)))

    def two_executors() -> list[dict[str, Any]] | None:
        pods = _executors(kube, run)
        started = [p for p in pods if lake.started_at(p)]
        return started if len(started) >= 2 else None

    executors = wait_until("two executors running", two_executors, 300)
    for n, pod in enumerate(sorted(executors, key=lambda p: lake.started_at(p) or 0), 1):
        timeline.mark(f"executor {n} Running", lake.started_at(pod))
    ips = {p["status"]["podIP"] for p in executors}
    assert len(ips) == 2 and all(ip.startswith("10.244.") for ip in ips), ips

    record = lake.wait_recorded(kube, TABLES, "events", run)
    assert record["outcome"] == "Succeeded", record
    after = lake.read_rows(store, uri)
    commit = Table.open(uri, store.options()).history()[0]
    timeline.mark("commit", dt.datetime.fromtimestamp(commit["timestamp"] / 1000, dt.UTC))
    assert commit["operation"] == "OPTIMIZE" and commit["txntableRunId"] == run

    # the driver's log: both executors registered with the driver from their pod IPs
    log = kube.kubectl("-n", TABLES, "logs", f"job/{run}").stdout
    registered = set(re.findall(r"Registered executor .*?\((10\.244\.[0-9.]+):\d+\)", log))
    assert registered == ips, log[-3000:]

    # files drop, rows do not change: deltalake and delta-spark read the same rows
    assert (after["version"], lake.files_of(store, uri)) == (13, 2)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    spark_read = lake.read_with_deltaspark(delta_spark, store, uri)
    assert spark_read["count"] == before["rows"]

    # one Job for the policy; its pods (driver and executors) go after the run's TTL
    assert [j["metadata"]["name"] for j in lake.runs_of(kube, TABLES, "events")] in ([run], [])
    wait_until(
        "the run's pods gone",
        lambda: (
            not lake.pods_of(kube, TABLES, f"txntable.io/run={run}") and not _executors(kube, run)
        ),
        300,
    )
    timeline.mark("pods gone")
    figures("OPTIMIZE timeline (s)", str(timeline))


def test_a_checkpoint_policy_makes_a_spark_checkpoint_run(
    kube: Kube, store: Store, operator: Install, delta_spark: Any, figures: Any, made: list[str]
) -> None:
    uri = lake.fragment(store, BUCKET, "checkpointed")
    before = lake.read_rows(store, uri)
    kube.apply(
        lake.custom("CheckpointPolicy", TABLES, "spark-checkpoints", {
            "tableSelector": {"matchLabels": {"e2e": "checkpointed"}},
            "commitInterval": 5, "mode": "Spark",
            "spark": {k: v for k, v in SPARK.items() if k != "autoSize"},
        }),
    )  # fmt: skip
    table = _table(store, "checkpointed", uri)
    table["metadata"]["labels"] = {"e2e": "checkpointed"}
    made.append("checkpointed")
    kube.apply(table)
    (job,) = wait_until(
        "the checkpoint Job", lambda: lake.runs_of(kube, TABLES, "checkpointed"), 300
    )
    run = job["metadata"]["name"]
    assert job["metadata"]["labels"]["txntable.io/kind"] == "checkpoint"
    record = lake.wait_recorded(kube, TABLES, "checkpointed", run, "lastCheckpoint")
    assert record["outcome"] == "Succeeded", record
    keys = store.keys(BUCKET, "checkpointed/_delta_log/")
    assert "checkpointed/_delta_log/00000000000000000012.checkpoint.parquet" in keys, keys
    after = lake.read_rows(store, uri)
    assert (after["version"], after["rows"], after["digest"]) == (
        before["version"], before["rows"], before["digest"],
    )  # fmt: skip
    assert lake.read_with_deltaspark(delta_spark, store, uri)["count"] == before["rows"]
    figures("checkpoint run", f"{run}: {record.get('message')}")


def test_a_vacuum_run_deletes_what_no_version_reads(
    kube: Kube, store: Store, operator: Install, figures: Any, made: list[str]
) -> None:
    """A table with nothing to compact and a removed file older than its retention (1 second
    here, the table's own delta.deletedFileRetentionDuration) gets a VACUUM-only run."""
    uri = f"s3://{BUCKET}/vacuumed"
    schema = pa.schema([("id", pa.int64()), ("part", pa.string())])
    table = Table.create(
        uri, schema, partition_by=["part"],
        properties={"delta.deletedFileRetentionDuration": "interval 1 second"},
        storage_options=store.options(),
    )  # fmt: skip
    table.append(pa.table({"id": [1, 2, 3, 4], "part": ["a", "b", "a", "b"]}))
    table.delete("part = 'a'")
    before = lake.read_rows(store, uri)
    removed = [k for k in store.keys(BUCKET, "vacuumed/part=a/") if k.endswith(".parquet")]
    assert len(removed) == 1, removed
    made.append("vacuumed")
    kube.apply(
        lake.custom("CompactionPolicy", TABLES, "vacuum-only", {
            "triggers": {"smallFiles": 50, "cooldown": "1h"},
            "vacuum": {"enabled": True, "interval": "1s"},
            "spark": SPARK,
        }),
        _table(store, "vacuumed", uri, compactionPolicyRef={"name": "vacuum-only"}),
    )  # fmt: skip
    (job,) = wait_until("the VACUUM Job", lambda: lake.runs_of(kube, TABLES, "vacuumed"), 300)
    run = job["metadata"]["name"]
    assert job["metadata"]["labels"]["txntable.io/kind"] == "vacuum"
    record = lake.wait_recorded(kube, TABLES, "vacuumed", run, "lastVacuum")
    assert record["outcome"] == "Succeeded", record
    assert removed[0] not in store.keys(BUCKET, "vacuumed/")
    after = lake.read_rows(store, uri)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    figures("VACUUM run", f"{run}: {record.get('message')}")
