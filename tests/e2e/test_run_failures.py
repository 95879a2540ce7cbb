"""What goes wrong with runs on a real node, as the controller sees it from the pods' status.

* a run whose image tag does not exist: the table's condition and the run's record say the
  image cannot be pulled, with the kubelet's reason;
* the controller pod deleted while a run is in flight: the Deployment's new pod adopts the run
  (no second Job) and records its end once;
* the kubelet restarted while a run is in flight: the run goes on and is recorded once;
* a run's driver pod evicted (the Eviction API, as a node drain does): the run fails, and its
  record says so;
* an executor killed for its memory (a small memory overhead): the run fails out of memory and
  the controller's one memory retry raises executor memory.

Each test has its own table in the shared install's namespace.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e import lake
from tests.e2e.lake import BUCKET, TABLES, Install
from tests.e2e.store import Store
from tests.e2e.support import Kube, wait_until

pytestmark = pytest.mark.e2e

SPARK: dict[str, Any] = {
    "backend": "Job",
    "driver": {"cores": 1, "memory": "1Gi"},
    "executor": {"instances": 1, "cores": 1, "memory": "1Gi"},
    "sparkConf": {"spark.kubernetes.executor.request.cores": "200m"},
    "autoSize": {"enabled": False},
}


def _apply(
    kube: Kube, store: Store, made: list[str], name: str, cooldown: str = "1h", **spark: Any
) -> str:
    uri = lake.fragment(store, BUCKET, name)
    made.append(name)
    kube.apply(
        lake.custom("CompactionPolicy", TABLES, name, {
            "targetFileSize": "64Mi", "minFileSize": "8Mi",
            "triggers": {"smallFiles": 2, "cooldown": cooldown},
            "spark": {**SPARK, **spark},
        }),
        lake.custom("TxnTable", TABLES, name, {
            "location": uri,
            "storage": {"options": store.table_options(),
                        "secretRef": {"name": "lake-credentials"}},
            "observeInterval": "5s",
            "compactionPolicyRef": {"name": name},
        }),
    )  # fmt: skip
    return uri


def _condition(kube: Kube, name: str, kind: str) -> dict[str, Any]:
    for cond in lake.table_status(kube, TABLES, name).get("conditions") or ():
        if cond["type"] == kind:
            return dict(cond)
    return {}


def _the_job(kube: Kube, name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = wait_until(
        f"{name}'s Job", lambda: lake.runs_of(kube, TABLES, name), 300
    )
    (job,) = found
    return job


def test_a_wrong_image_tag_is_said_in_the_tables_status(
    kube: Kube, store: Store, operator: Install, made: list[str]
) -> None:
    name = "wrong-image"
    _apply(kube, store, made, name, image="ghcr.io/txntable/txntable-spark:no-such-tag")
    job = _the_job(kube, name)
    said = wait_until(
        "Compacting says RunCannotStart",
        lambda: (c := _condition(kube, name, "Compacting")).get("reason") == "RunCannotStart" and c,
        180,
        every=2.0,
    )
    assert said["status"] == "True"
    assert job["metadata"]["name"] in said["message"]
    assert "ghcr.io/txntable/txntable-spark:no-such-tag" in said["message"], said
    assert "ImagePullBackOff" in said["message"] or "ErrImagePull" in said["message"], said
    record = lake.table_status(kube, TABLES, name)["lastCompaction"]
    assert record["outcome"] == "Running" and "cannot start" in record["message"], record
    events = kube.get("-n", TABLES, "events", "--field-selector", "reason=RunCannotStart")
    assert [e for e in events["items"] if e["involvedObject"]["name"] == name]


def test_a_controller_pod_deleted_mid_run_is_replaced_and_the_run_adopted(
    kube: Kube, store: Store, operator: Install, made: list[str]
) -> None:
    name = "controller-gone"
    _apply(kube, store, made, name)
    job = _the_job(kube, name)
    run = job["metadata"]["name"]
    (old,) = lake.pods_of(kube, operator.namespace, "app.kubernetes.io/component=controller")
    kube.kubectl("-n", operator.namespace, "delete", "pod", old["metadata"]["name"], "--wait=true")
    kube.kubectl(
        "-n", operator.namespace, "rollout", "status", f"deployment/{operator.deployment}",
        "--timeout=180s",
    )  # fmt: skip
    record = lake.wait_recorded(kube, TABLES, name, run)
    assert record["outcome"] == "Succeeded", record
    assert [j["metadata"]["name"] for j in lake.runs_of(kube, TABLES, name)] == [run]
    events = kube.get("-n", TABLES, "events", "--field-selector", f"involvedObject.name={name}")
    ends = [e for e in events["items"] if e["reason"] == "RunSucceeded"]
    assert len(ends) == 1 and ends[0].get("count", 1) == 1, ends


def test_a_kubelet_restarted_mid_run_leaves_the_run_to_finish(
    kube: Kube, store: Store, operator: Install, real_cluster: Any, made: list[str]
) -> None:
    name = "kubelet-restart"
    _apply(kube, store, made, name)
    job = _the_job(kube, name)
    run = job["metadata"]["name"]
    wait_until(
        "the driver running",
        lambda: any(lake.started_at(p) for p in lake.pods_of(kube, TABLES, f"job-name={run}")),
        300,
    )
    real_cluster.node.restart_kubelet()
    record = lake.wait_recorded(kube, TABLES, name, run)
    assert record["outcome"] == "Succeeded", record
    assert [j["metadata"]["name"] for j in lake.runs_of(kube, TABLES, name)] == [run]


def test_an_evicted_driver_fails_the_run_and_the_record_says_so(
    kube: Kube, store: Store, operator: Install, made: list[str]
) -> None:
    name = "evicted"
    uri = _apply(kube, store, made, name)
    before = lake.read_rows(store, uri)
    job = _the_job(kube, name)
    run = job["metadata"]["name"]
    pod = wait_until(
        "the driver running",
        lambda: next(
            (p for p in lake.pods_of(kube, TABLES, f"job-name={run}") if lake.started_at(p)),
            None,
        ),
        300,
    )
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod["metadata"]["name"], "namespace": TABLES},
    }
    kube.run(
        "kubectl", "create", "--raw",
        f"/api/v1/namespaces/{TABLES}/pods/{pod['metadata']['name']}/eviction",
        "-f", "-", input=json.dumps(eviction),
    )  # fmt: skip
    record = lake.wait_recorded(kube, TABLES, name, run)
    assert record["outcome"] == "Failed", record
    assert "evict" in record["message"].lower(), record
    after = lake.read_rows(store, uri)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])


def test_an_executor_killed_for_memory_is_retried_with_more(
    kube: Kube, store: Store, operator: Install, made: list[str]
) -> None:
    name = "oom"
    # the executor pod's limit is its heap plus this overhead, and the JVM touches its whole
    # heap at start (AlwaysPreTouch; the image's entrypoint sets -Xms to the heap): it outgrows
    # the limit before it does anything, however small the table (without the pre-touch a
    # small table fitted, and the run succeeded)
    # a retry waits the back-off and never less than the cooldown (docs/operations.md): 1 s
    _apply(
        kube, store, made, name, cooldown="1s",
        executor={"instances": 1, "cores": 1, "memory": "512Mi"},
        sparkConf={**SPARK["sparkConf"], "spark.executor.memoryOverhead": "16m",
                   "spark.executor.minMemoryOverhead": "16m",
                   "spark.executor.extraJavaOptions": "-XX:+AlwaysPreTouch"},
        autoSize={"enabled": False, "maxExecutorMemory": "4Gi"},
    )  # fmt: skip
    first = _the_job(kube, name)
    record = lake.wait_recorded(kube, TABLES, name, first["metadata"]["name"])
    assert record["outcome"] == "Failed" and "out of memory" in record["message"], record

    def retry() -> dict[str, Any] | None:
        jobs = [j for j in lake.runs_of(kube, TABLES, name) if j is not None]
        later = [j for j in jobs if j["metadata"]["name"] != first["metadata"]["name"]]
        return later[0] if later else None

    second = wait_until("the memory retry", retry, 600, every=5.0)
    sizing = json.loads(second["metadata"]["annotations"]["txntable.io/sizing"])
    assert sizing["from"] == "MemoryRetry", sizing
    assert sizing["heap"] > 512 * 2**20, sizing  # the first run's executors had 512 MiB
