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
    kube: Kube, store: Store, operator: Install, delta_spark: Any, figures: Any
) -> None:
    uri = lake.fragment(store, BUCKET, "events")
    before = lake.read_rows(store, uri)
    assert (before["version"], lake.files_of(store, uri)) == (12, 24)
    timeline = Timeline()
    timeline.mark("policy applied")
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
