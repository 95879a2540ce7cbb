"""The Kopf controller in-process against kmock: its resources, manifests and waits for its work."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from kopf.testing import KopfRunner

from tests.kubeconfig import write_kubeconfig
from tests.support.manifests import (
    checkpoint_policy_manifest,
    compaction_policy_manifest,
    table_manifest,
)
from txntable.engine import Table


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# The handlers read their configuration once, when KopfRunner imports them: set it first.
os.environ.setdefault("TXNTABLE_OBSERVE_INTERVAL_SECONDS", "1")
os.environ.setdefault("TXNTABLE_METRICS_PORT", str(_free_port()))
os.environ.setdefault("TXNTABLE_HEALTH_PORT", str(_free_port()))

TABLES = "txntable.io/v1alpha1/txntables"
COMPACTION = "txntable.io/v1alpha1/compactionpolicies"
CHECKPOINT = "txntable.io/v1alpha1/checkpointpolicies"
SPARKAPPS = "sparkoperator.k8s.io/v1beta2/sparkapplications"


def fragmented_table(path: Path, appends: int = 12) -> None:
    schema = pa.schema([("id", pa.int64()), ("part", pa.string()), ("v", pa.float64())])
    table = Table.create(str(path), schema, partition_by=["part"])
    for i in range(appends):
        table.append(
            pa.table(
                {
                    "id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
                    "part": pa.array(["a", "b"] * 5),
                    "v": pa.array([float(i)] * 10),
                }
            )
        )


def data_and_commits(location: Path) -> list[tuple[str, int]]:
    """Data files and commit files with their sizes (checkpoints may legitimately appear)."""
    return sorted(
        (str(p.relative_to(location)), p.stat().st_size)
        for p in location.rglob("*")
        if p.is_file()
        and (
            (p.suffix == ".parquet" and "_delta_log" not in p.parts)
            or (p.name.endswith(".json") and p.name[0].isdigit())
        )
    )


def register_resources(kmock: Any) -> None:
    ro = ["list", "watch", "get"]
    kmock.resources["apiextensions.k8s.io/v1/customresourcedefinitions"] = {
        "kind": "CustomResourceDefinition",
        "namespaced": False,
        "verbs": ro,
    }
    kmock.resources["v1/namespaces"] = {"kind": "Namespace", "namespaced": False, "verbs": ro}
    kmock.resources["v1/events"] = {
        "kind": "Event",
        "namespaced": True,
        "verbs": ["create", "list"],
    }
    rw = ["list", "watch", "get", "patch", "create", "delete", "update"]
    for key, kind in (
        (TABLES, "TxnTable"),
        (COMPACTION, "CompactionPolicy"),
        (CHECKPOINT, "CheckpointPolicy"),
    ):
        kmock.resources[key] = {
            "kind": kind,
            "namespaced": True,
            "verbs": rw,
            "subresources": ["status"],
        }
    kmock.resources[SPARKAPPS] = {
        "kind": "SparkApplication",
        "namespaced": True,
        "verbs": ["list", "get", "create", "delete", "watch"],
    }


def manifests(location: str, *, small_files: int = 4) -> dict[str, dict[str, Any]]:
    return {
        "table": table_manifest(
            "events",
            location,
            metadata={"uid": "uid-events", "generation": 1},
            observeInterval="1s",
            compactionPolicyRef={"name": "compact"},
            checkpointPolicyRef={"name": "ckpt"},
        ),
        "compaction": compaction_policy_manifest(
            "compact",
            targetFileSize="64Mi",
            minFileSize="8Mi",
            triggers={"smallFiles": small_files, "cooldown": "1h"},
            spark={"backend": "SparkApplication"},
        ),
        "checkpoint": checkpoint_policy_manifest(
            "ckpt", commitInterval=5, mode="Inline", logCleanup={"enabled": False}
        ),
    }


def apply(kmock: Any, docs: dict[str, dict[str, Any]]) -> None:
    for doc in docs.values():  # Kopf patches with a resourceVersion precondition
        doc["metadata"].setdefault("resourceVersion", "1")
    kmock.objects[TABLES, "default", "events"] = docs["table"]
    kmock.objects[COMPACTION, "default", "compact"] = docs["compaction"]
    kmock.objects[CHECKPOINT, "default", "ckpt"] = docs["checkpoint"]


def status(kmock: Any) -> dict[str, Any]:
    try:
        return dict(kmock.objects[TABLES, "default", "events"].get("status") or {})
    except KeyError:
        return {}


def spark_apps(kmock: Any) -> list[dict[str, Any]]:
    out = []
    for key, obj in list(kmock.objects.items()):
        if key[0].plural != "sparkapplications":
            continue
        try:
            out.append(dict(obj.raw))
        except ValueError:  # soft-deleted: gone for every reader
            continue
    return out


def use_kmock(kmock: Any) -> None:
    """Point the controller at kmock the way it finds a cluster without in-cluster credentials:
    a kubeconfig (server, token) in ``KUBECONFIG``, read by Kopf's login and by the handlers'
    own client alike."""
    from kubernetes.config import kube_config

    path = Path(tempfile.gettempdir()) / f"txntable-kmock-{os.getpid()}.kubeconfig"
    os.environ["KUBECONFIG"] = str(write_kubeconfig(path, str(kmock.url).rstrip("/"), "test"))
    # the client reads KUBECONFIG once, at import (a process started with it set needs nothing
    # more); the controller runs in this test process, which imported the client long before
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(path)


async def operate_until(kmock: Any, done: Callable[[], bool], timeout: float = 240) -> bool:
    use_kmock(kmock)

    def run() -> bool:
        args = ["run", "-A", "--standalone", "-m", "txntable.handlers.kopf_handlers"]
        with KopfRunner(args, timeout=60):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if done():
                    return True
                time.sleep(0.5)
        return False

    return await asyncio.get_running_loop().run_in_executor(None, run)


def metrics_text() -> str:
    """What Prometheus would scrape from the controller's /metrics (served in-process)."""
    import urllib.request

    url = f"http://127.0.0.1:{os.environ['TXNTABLE_METRICS_PORT']}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


ERROR = 'driver container failed with ExitCode: 1, Reason: "OOMKilled"'


class FailingSparkOperator:
    """Marks every new SparkApplication FAILED with an error message, as the Spark Operator
    does for a driver that died; counts the applications it saw (the real launches)."""

    def __init__(self, kmock: Any, error: str = ERROR) -> None:
        self.kmock = kmock
        self.error = error
        self.failed: list[str] = []
        #: each application's manifest as the controller created it, by name
        self.apps: dict[str, dict[str, Any]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> FailingSparkOperator:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)

    def _loop(self) -> None:
        while not self.stop.is_set():
            for app in spark_apps(self.kmock):
                name = app["metadata"]["name"]
                if name in self.failed:
                    continue
                self.apps[name] = json.loads(json.dumps(app))
                now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                obj = self.kmock.objects[SPARKAPPS, "default", name]
                obj["status"] = {
                    "applicationState": {"state": "FAILED", "errorMessage": self.error},
                    "lastSubmissionAttemptTime": now,
                    "terminationTime": now,
                }
                self.failed.append(name)
            time.sleep(0.2)


def events(kmock: Any) -> list[dict[str, Any]]:
    """Every Event the controller posted (from the request log: kmock keeps stored objects by
    name, and Kopf names Events with ``generateName``, so stored Events overwrite each other)."""
    return [
        dict(r.data)
        for r in list(kmock)
        if str(r.method).upper().endswith("POST")
        and r.url.path.endswith("/events")
        and isinstance(r.data, dict)
    ]


def by_reason(kmock: Any, reason: str) -> list[dict[str, Any]]:
    return [e for e in events(kmock) if e.get("reason") == reason]
