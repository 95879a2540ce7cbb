"""Least privilege proven by the real authorizer: what the chart grants is what the controller uses.

The controller runs under the chart's ServiceAccount and RBAC through every path that needs a
permission: tables and both kinds of policy (watch, patch, status), a storage Secret, a
compaction run on each backend (a batch Job and a SparkApplication: created, listed, read in
detail with its driver's pod and log once finished, deleted by the history limit), Events,
Kopf's peering. The test plays the absent controllers (Job controller, Spark Operator, kubelet).
Then the API server's audit log says which requests the ServiceAccount made: every one must have
been allowed, and every grant of the chart must have been used, or be listed in ``NOT_REQUESTS``
with the reason no request shows it. The table is printed (``-s``) for docs/install.md.

The API server runs the OwnerReferencesPermissionEnforcement admission plugin (as OpenShift
does): a run carries a ``blockOwnerDeletion`` owner reference to its TxnTable, which that
plugin allows only with ``update`` on ``txntables/finalizers``.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.controlplane import flows, rbac
from tests.controlplane.conftest import INSTALL_VALUES, TABLES_NAMESPACE
from tests.controlplane.controller import Install, install_chart
from tests.controlplane.kube import apply, apply_all, condition, get_table, wait_for
from tests.controlplane.plane import ControlPlane
from tests.controlplane.standins import driver_pod, job_pod
from tests.support.kmock_controller import fragmented_table
from tests.support.manifests import (
    checkpoint_policy_manifest,
    compaction_policy_manifest,
    table_manifest,
)

SPARK_CRD = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "k8s"

#: grants no request shows, each with the reason it is needed
NOT_REQUESTS = {
    ("txntable.io", "txntables/finalizers", "update"): (
        "checked by the OwnerReferencesPermissionEnforcement admission plugin when a run is "
        "created with a blockOwnerDeletion owner reference to its TxnTable (no request of its own)"
    ),
}


def _docs(ns: str, location: Path, backend: str, name: str) -> list[dict[str, Any]]:
    return [
        compaction_policy_manifest(
            name,
            namespace=ns,
            targetFileSize="64Mi",
            minFileSize="8Mi",
            triggers={"smallFiles": 2, "cooldown": "1h"},
            spark={"backend": backend},
            # a finished run is read in detail, then deleted (the history limit)
            successfulRunsHistoryLimit=0,
            failedRunsHistoryLimit=0,
        ),
        table_manifest(
            name,
            location,
            namespace=ns,
            observeInterval="1s",
            compactionPolicyRef={"name": name},
            checkpointPolicyRef={"name": "rbac-checkpoints"},
            storage={"secretRef": {"name": "rbac-storage"}},
        ),
    ]


def _finish_job(api: Any, ns: str, job: dict[str, Any]) -> None:
    """What the Job controller (and a kubelet) would do: the Job's pod (left unscheduled: no
    kubelet serves its log), then a completed status that passes the API server's Job status
    validation."""
    name = job["metadata"]["name"]
    client.CoreV1Api(api).create_namespaced_pod(ns, job_pod(job, node=None))
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    cond = {"status": "True", "lastProbeTime": now, "lastTransitionTime": now}
    status = {
        "startTime": now,
        "completionTime": now,
        "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", **cond},
            {"type": "Complete", **cond},
        ],
    }
    client.BatchV1Api(api).patch_namespaced_job_status(name, ns, {"status": status})


def _finish_app(api: Any, ns: str, app: dict[str, Any]) -> None:
    """What the Spark Operator would do: the driver pod (unscheduled), then COMPLETED."""
    name = app["metadata"]["name"]
    pod = driver_pod(app, str(uuid.uuid4()), node=None)
    driver = pod["metadata"]["name"]
    client.CoreV1Api(api).create_namespaced_pod(ns, pod)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {
        "applicationState": {"state": "COMPLETED"},
        "driverInfo": {"podName": driver},
        "lastSubmissionAttemptTime": now,
        "terminationTime": now,
    }
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        "sparkoperator.k8s.io", "v1beta2", ns, "sparkapplications", name, {"status": status}
    )


#: where the cluster-wide release's tables and runs are (listed in its ``spark.namespaces``)
CLUSTER_WIDE_TABLES = "txntable-cw-tables"


@pytest.fixture(scope="module")
def cluster_wide(control_plane: ControlPlane, installed: Install, tmp_path_factory: Any) -> Install:
    """A second release, cluster-wide (the CRDs are the first release's), with the Spark
    drivers' ServiceAccount in the namespace its runs execute in, as docs/chart-values.md says
    a cluster-wide install needs (``spark.namespaces``): without it the Job controller's pod,
    which runs as that account, is refused by the ServiceAccount admission plugin."""
    values = {
        **INSTALL_VALUES,
        "watch": {"clusterWide": True},
        "crds": {"create": False},
        "spark": {"namespaces": [CLUSTER_WIDE_TABLES]},
    }
    return install_chart(
        control_plane,
        tmp_path_factory.mktemp("cluster-wide"),
        release="txntable-cw",
        namespace="txntable-cw-system",
        values=values,
    )


@pytest.mark.parametrize("mode", ["namespaced", "cluster-wide"])
def test_the_chart_grants_exactly_what_the_controller_uses(
    control_plane: ControlPlane,
    installed: Install,
    admin: Any,
    start_controller: Any,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    mode: str,
) -> None:
    install = installed if mode == "namespaced" else request.getfixturevalue("cluster_wide")
    ns = TABLES_NAMESPACE if mode == "namespaced" else CLUSTER_WIDE_TABLES
    apply_all(admin, [yaml.safe_load(p.read_text()) for p in sorted(SPARK_CRD.glob("*.yaml"))])
    for name in ("rbac-job", "rbac-spark"):
        fragmented_table(tmp_path / name)
    core = client.CoreV1Api(admin)
    core.create_namespaced_secret(
        ns,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="rbac-storage"), string_data={"AWS_REGION": "x"}
        ),
    )
    ckpt = checkpoint_policy_manifest(
        "rbac-checkpoints",
        namespace=ns,
        commitInterval=5,
        mode="Inline",
        logCleanup={"enabled": False},
    )
    docs = [ckpt, *_docs(ns, tmp_path / "rbac-job", "Job", "rbac-job")]
    docs += _docs(ns, tmp_path / "rbac-spark", "SparkApplication", "rbac-spark")
    start_controller(install)
    for doc in docs:
        apply(admin, doc)

    job = flows.the_run(admin, ns, "rbac-job", "job", timeout=120)
    app = flows.the_run(admin, ns, "rbac-spark", "sparkapplication", timeout=120)
    _finish_job(admin, ns, job)
    _finish_app(admin, ns, app)
    # both runs followed to the end, read in detail and deleted by the history limit of 0
    for name in ("rbac-job", "rbac-spark"):
        wait_for(
            f"{name}'s run finished in status",
            lambda n=name: flows.compaction(admin, ns, n).get("outcome") not in (None, "Running"),  # type: ignore[misc]
            timeout=120,
        )
    wait_for(
        "the finished Job deleted", lambda: not flows.jobs_of(admin, ns, "rbac-job"), timeout=120
    )
    wait_for(
        "the finished SparkApplication deleted",
        lambda: not flows.apps_of(admin, ns, "rbac-spark"),
        timeout=120,
    )
    assert condition(get_table(admin, ns, "rbac-job"), "Ready") is not None
    custom = client.CustomObjectsApi(admin)
    for doc in reversed(docs):  # the controller removes its finalizer from the tables
        custom.delete_namespaced_custom_object(
            flows.GROUP, flows.VERSION, ns, flows.PLURALS[doc["kind"]], doc["metadata"]["name"]
        )
    wait_for(
        "the tables deleted",
        lambda: (
            not [
                t
                for t in custom.list_namespaced_custom_object(
                    flows.GROUP, flows.VERSION, ns, "txntables"
                )["items"]
                if t["metadata"]["name"].startswith("rbac-")
            ]
        ),
        timeout=60,
    )

    grants = rbac.granted(install)
    # not what a restarted API server refused before its authorizer synced (test_controller_faults)
    events = [e for e in control_plane.audit_events() if not control_plane.while_restarting(e)]
    allowed, forbidden = rbac.used(events, install.user)
    print("\n" + rbac.table(grants, allowed | forbidden, {k: v for k, v in NOT_REQUESTS.items()}))
    assert forbidden == set(), f"refused by the authorizer: {sorted(forbidden)}"
    assert rbac.ungranted(grants, allowed) == set()
    never = {
        g for g in rbac.unused(grants, allowed) if (g.group, g.resource, g.verb) not in NOT_REQUESTS
    }
    assert never == set(), f"granted, never used: {sorted(never)}"
