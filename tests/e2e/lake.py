"""The operator as a user installs it on the real node, and tables on the in-cluster S3.

``install`` runs ``helm install`` of the chart (helm built from its Go module) with the images
under the chart's default names (``make images`` imported them into the node's containerd, so
``IfNotPresent`` finds them and nothing is pulled), into a namespace that enforces the restricted
Pod Security level, and waits for the controller pod to pass its probes. ``fragment`` writes a
fragmented partitioned table to the store through the engine, as an ingest job would;
``read_rows`` reads it back with deltalake (in a child process) and ``read_with_deltaspark`` with
delta-spark from a local copy (delta-spark has no S3 connector here). ``Timeline`` records when
each step of a run was seen, for the figures the tier reports.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tests import oracle_read
from tests.e2e.store import Store
from tests.e2e.support import Kube, wait_until
from txntable.engine import Table

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "txntable-operator"
GROUP_VERSION = "txntable.io/v1alpha1"
ROWS_PER_APPEND, APPENDS = 10, 12
#: the namespace of the shared install's tables, its release and namespace, the store's bucket
TABLES, RELEASE, SYSTEM = "e2e-tables", "txntable", "txntable-system"
BUCKET = "lake"
#: how long finished runs and their pods stay (TXNTABLE_RUN_TTL_SECONDS)
RUN_TTL_SECONDS = 40


@dataclass(frozen=True)
class Install:
    release: str
    namespace: str
    tables: str

    @property
    def deployment(self) -> str:
        return f"{self.release}-txntable-operator"


def install(
    kube: Kube, release: str, namespace: str, tables: str, *values: str, wait: bool = True
) -> Install:
    """``helm install`` the chart watching ``tables``; ``values`` are extra ``--set`` items."""
    kube.namespace(namespace)
    args = ["install", release, str(CHART), "--namespace", namespace,
            "--set", f"watch.namespaces={{{tables}}}"]  # fmt: skip
    for value in values:
        args += ["--set", value]
    if wait:
        args += ["--wait", "--timeout", "5m"]
    kube.helm(*args)
    return Install(release=release, namespace=namespace, tables=tables)


def uninstall(kube: Kube, inst: Install) -> None:
    kube.helm("uninstall", inst.release, "--namespace", inst.namespace, "--wait", check=False)


def fragment(store: Store, bucket: str, name: str) -> str:
    """A table of ``APPENDS`` appends of ``ROWS_PER_APPEND`` rows into partitions a and b
    (two files per append); its URI."""
    uri = f"s3://{bucket}/{name}"
    schema = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.float64())])
    table = Table.create(uri, schema, partition_by=["part"], storage_options=store.options())
    for i in range(APPENDS):
        start = i * ROWS_PER_APPEND
        table.append(
            pa.table(
                {
                    "id": pa.array(range(start, start + ROWS_PER_APPEND), pa.int64()),
                    "part": pa.array(["a", "b"] * (ROWS_PER_APPEND // 2)),
                    "v": pa.array([float(i)] * ROWS_PER_APPEND),
                }
            )
        )
    return uri


def read_rows(store: Store, uri: str) -> dict[str, Any]:
    """deltalake's reading of the latest version: ``{"rows", "digest", "version"}``."""
    return dict(oracle_read.read(uri, storage_options=store.options()))


def download(store: Store, uri: str, dest: Path) -> Path:
    """A byte copy of the table at ``uri`` (every object under its prefix) at ``dest``."""
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=store.from_host,
        region_name=store.options()["AWS_REGION"],
        aws_access_key_id=store.options()["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=store.options()["AWS_SECRET_ACCESS_KEY"],
    )
    for key in store.keys(bucket, prefix + "/"):
        target = dest / key[len(prefix) + 1 :]
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, key, str(target))
    return dest


def read_with_deltaspark(delta_spark: Any, store: Store, uri: str) -> dict[str, Any]:
    """delta-spark's reading of a byte copy of the table: ``{"count", "digest"}``."""
    tmp = Path(tempfile.mkdtemp(prefix="txntable-e2e-copy-"))
    try:
        local = download(store, uri, tmp / "table")
        return dict(delta_spark.read(str(local)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def files_of(store: Store, uri: str) -> int:
    return len(Table.open(uri, store.options()).snapshot().files())


def custom(kind: str, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": GROUP_VERSION,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def table_status(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return dict(kube.get("-n", namespace, "txntable", name).get("status") or {})


def runs_of(kube: Kube, namespace: str, table: str, kind: str = "jobs") -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kube.get(
        "-n", namespace, kind, "-l", f"txntable.io/table={table}"
    )["items"]
    return items


def pods_of(kube: Kube, namespace: str, selector: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kube.get("-n", namespace, "pods", "-l", selector)["items"]
    return items


def started_at(pod: dict[str, Any]) -> dt.datetime | None:
    for status in pod.get("status", {}).get("containerStatuses") or ():
        for state in (status.get("state") or {}, status.get("lastState") or {}):
            for key in ("running", "terminated"):
                if state.get(key, {}).get("startedAt"):
                    return parse_time(state[key]["startedAt"])
    return None


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


@dataclass
class Timeline:
    """Named moments of one run, in seconds from the first."""

    moments: dict[str, dt.datetime] = field(default_factory=dict)

    def mark(self, name: str, at: dt.datetime | None = None) -> None:
        self.moments.setdefault(name, at or dt.datetime.now(dt.UTC))

    def seconds(self) -> dict[str, float]:
        if not self.moments:
            return {}
        first = min(self.moments.values())
        ordered = sorted(self.moments.items(), key=lambda kv: kv[1])
        return {name: round((at - first).total_seconds(), 1) for name, at in ordered}

    def __str__(self) -> str:
        return json.dumps(self.seconds())


def wait_recorded(
    kube: Kube,
    namespace: str,
    table: str,
    run: str,
    field_name: str = "lastCompaction",
    timeout: float = 900,
) -> dict[str, Any]:
    """``status.<field_name>`` (lastCompaction, lastCheckpoint, ...) once it records run
    ``run`` as finished."""

    def recorded() -> dict[str, Any] | None:
        found = table_status(kube, namespace, table).get(field_name) or {}
        done = found.get("runName") == run and found.get("outcome") not in (None, "Running")
        return dict(found) if done else None

    out: dict[str, Any] = wait_until(f"{table}: run {run} recorded", recorded, timeout, every=2)
    return out
