"""The chart's default backend for real: the Kubeflow Spark Operator (built from its Go module,
in a pod of an image built on our Spark image, installed by its own chart from the module)
runs our SparkApplications: one OPTIMIZE and one checkpoint end to end.

The operator's chart comes from the same module its binary is built from, with its webhook
(which puts our security contexts, volumes and environment on the driver and executor pods);
the only values changed are the image and the namespaces it watches.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e import lake
from tests.e2e.lake import BUCKET, Install, Timeline
from tests.e2e.store import Store
from tests.e2e.support import Kube, wait_until
from tests.node import binaries
from tests.node.images import SPARK_OPERATOR_IMAGE
from txntable.engine import Table

pytestmark = pytest.mark.e2e

TABLES = "e2e-spark-tables"
SPARK: dict[str, Any] = {
    "backend": "SparkApplication",
    "driver": {"cores": 1, "memory": "1Gi"},
    "executor": {"instances": 1, "cores": 1, "memory": "1Gi"},
    "sparkConf": {"spark.kubernetes.executor.request.cores": "200m"},
    "autoSize": {"enabled": False},
}


def _operator_chart() -> str:
    version = binaries.SPARK_OPERATOR.required(binaries.SPARK_OPERATOR_MODULE)
    source = binaries.module_source(binaries.SPARK_OPERATOR_MODULE, version)
    return str(source / "charts" / "spark-operator-chart")


@pytest.fixture(scope="module")
def spark_operator(kube: Kube) -> Iterator[str]:
    ns = kube.namespace("spark-operator")
    kube.namespace(TABLES)
    image = SPARK_OPERATOR_IMAGE.format(
        version=binaries.SPARK_OPERATOR.required(binaries.SPARK_OPERATOR_MODULE)
    )
    registry, _, rest = image.partition("/")
    repository, _, tag = rest.partition(":")
    kube.helm(
        "install", "spark-operator", _operator_chart(), "--namespace", ns,
        "--set", f"image.registry={registry}", "--set", f"image.repository={repository}",
        "--set", f"image.tag={tag}", "--set", f"spark.jobNamespaces={{{TABLES}}}",
        "--set", "spark.serviceAccount.create=false",
        "--wait", "--timeout", "5m",
    )  # fmt: skip
    # Spark 4.3's cluster-mode submission makes a NetworkPolicy for each driver (its
    # NetworkPolicyFeatureStep), which the operator's chart v2.4.0 does not let it create: every
    # SparkApplication failed with "cannot patch resource networkpolicies". A user whose
    # operator image carries Spark 4.3 adds the same Role (docs/install.md).
    kube.apply(*_network_policy_grant(ns))
    try:
        yield ns
    finally:
        kube.helm("uninstall", "spark-operator", "--namespace", ns, "--wait", check=False)


def _network_policy_grant(operator_namespace: str) -> list[dict[str, Any]]:
    """A Role and RoleBinding in the table namespace: the operator's controller may manage
    the NetworkPolicies Spark 4.3's submission makes for its drivers."""
    meta = {"name": "spark-operator-driver-network-policies", "namespace": TABLES}
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [
                {
                    "apiGroups": ["networking.k8s.io"],
                    "resources": ["networkpolicies"],
                    "verbs": ["get", "create", "patch", "delete"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": meta["name"],
            },
            "subjects": [
                {
                    "kind": "ServiceAccount",
                    "name": "spark-operator-controller",
                    "namespace": operator_namespace,
                }
            ],
        },
    ]


@pytest.fixture(scope="module")
def spark_install(kube: Kube, store: Store, spark_operator: str) -> Iterator[Install]:
    kube.apply(store.secret(TABLES))
    inst = lake.install(
        kube, "txntable-sparkapp", "txntable-sparkapp-system", TABLES,
        "config.observeIntervalSeconds=5", "rbac.backends={sparkapplication}",
        "crds.create=false",
    )  # fmt: skip
    try:
        yield inst
    finally:
        lake.uninstall(kube, inst)


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


def test_the_spark_operator_runs_an_optimize_and_a_checkpoint(
    kube: Kube, store: Store, spark_install: Install, delta_spark: Any, figures: Any
) -> None:
    uri = lake.fragment(store, BUCKET, "sparkapp-events")
    before = lake.read_rows(store, uri)
    timeline = Timeline()
    timeline.mark("policies applied")
    kube.apply(
        lake.custom("CompactionPolicy", TABLES, "small-files", {
            "targetFileSize": "64Mi", "minFileSize": "8Mi",
            "triggers": {"smallFiles": 2, "cooldown": "1h"},
            "spark": SPARK,
        }),
        lake.custom("CheckpointPolicy", TABLES, "checkpoints", {
            # autoSize is compaction's: the CheckpointPolicy CRD has no such field
            "commitInterval": 1, "mode": "Spark",
            "spark": {k: v for k, v in SPARK.items() if k != "autoSize"},
        }),
        _table(store, "events", uri, compactionPolicyRef={"name": "small-files"},
               checkpointPolicyRef={"name": "checkpoints"}),
    )  # fmt: skip

    def app(kind: str) -> dict[str, Any] | None:
        for item in lake.runs_of(kube, TABLES, "events", "sparkapplications"):
            if item["metadata"]["labels"].get("txntable.io/kind") == kind:
                return item
        return None

    optimize = wait_until("an OPTIMIZE SparkApplication", lambda: app("optimize"), 300)
    run = optimize["metadata"]["name"]
    timeline.mark(
        "SparkApplication created", lake.parse_time(optimize["metadata"]["creationTimestamp"])
    )
    record = lake.wait_recorded(kube, TABLES, "events", run)
    assert record["outcome"] == "Succeeded", record
    commit = Table.open(uri, store.options()).history()[0]
    assert commit["operation"] == "OPTIMIZE" and commit["txntableRunId"] == run
    timeline.mark("commit", dt.datetime.fromtimestamp(commit["timestamp"] / 1000, dt.UTC))
    after = lake.read_rows(store, uri)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    assert lake.files_of(store, uri) == 2
    assert lake.read_with_deltaspark(delta_spark, store, uri)["count"] == before["rows"]

    wait_until("a checkpoint SparkApplication", lambda: app("checkpoint"), 300)

    def checkpointed() -> dict[str, Any] | None:
        # the OPTIMIZE's commit may bring a second checkpoint (commitInterval 1): the record
        # names the newest finished one, so any checkpoint run of the table will do
        found = lake.table_status(kube, TABLES, "events").get("lastCheckpoint") or {}
        names = {
            item["metadata"]["name"]
            for item in lake.runs_of(kube, TABLES, "events", "sparkapplications")
            if item["metadata"]["labels"].get("txntable.io/kind") == "checkpoint"
        }
        finished = found.get("outcome") not in (None, "Running")
        return dict(found) if finished and found.get("runName") in names else None

    record = wait_until("a checkpoint run recorded", checkpointed, 900)
    assert record["outcome"] == "Succeeded", record
    keys = store.keys(BUCKET, "sparkapp-events/_delta_log/")
    assert any(k.endswith(".checkpoint.parquet") for k in keys), keys
    assert lake.read_with_deltaspark(delta_spark, store, uri)["count"] == before["rows"]
    figures("SparkApplication OPTIMIZE timeline (s)", str(timeline))
