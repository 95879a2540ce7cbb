"""A RunRequest with every field set, and the cases the manifest tests vary it by."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from txntable.launch.run import Backend, Resources, RunKind, RunRequest

WHEN = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
GIB = 1024**3


def request(**changes: Any) -> RunRequest:
    base: dict[str, Any] = {
        "kind": RunKind.OPTIMIZE,
        "backend": Backend.SPARK_APPLICATION,
        "namespace": "lake",
        "table": "sales",
        "table_uid": "0b8f5a1e-6f0e-4d5c-9a57-1f2e3d4c5b6a",
        "policy": "nightly",
        "table_uri": "s3://bucket/sales",
        "scheduled_time": WHEN,
        "args": ("s3://bucket/sales", "--target-size", "128MB"),
        "storage_options": {"region": "eu-west-1", "endpoint_url": "http://minio:9000"},
        "secret_ref": "sales-s3",
    }
    base.update(changes)
    return RunRequest(**base)


CASES = {
    "minimal": {"secret_ref": None, "storage_options": {}, "args": ()},
    "with-secret": {},
    "checkpoint": {"kind": RunKind.CHECKPOINT, "policy": "every-100"},
    "retry-attempt": {"attempt": 3, "backend_retries": 2},
    "resources": {
        "driver": Resources(cores=2, memory=4 * GIB, core_limit="2500m"),
        "executor": Resources(cores=4, memory=8 * GIB + 1, core_limit="4"),
        "executor_instances": 7,
        "deadline_seconds": 3600,
        "ttl_seconds": 0,
    },
    "spark-conf": {
        "spark_conf": {"spark.sql.shuffle.partitions": "8", "spark.x": "$(NOT_EXPANDED)"},
        "image": "registry.example/txn:1.2",
        "image_pull_policy": "Always",
        "service_account": "lake-spark",
    },
    "long-names": {
        "table": "a-very-long-table-name-that-goes-on." + "x" * 90,
        "policy": "p" * 200,
    },
}
