"""The Spark executor: each bin is one Spark task running ``rewrite_bin`` on an executor.

Why tasks over RDDs and not the DataFrame API (docs/adr/0001-optimize-on-spark.md): a bin must
become exactly the files we describe in the ``add`` actions, with the statistics and tags we
compute, in the partition directory we choose; Spark's Parquet writer would name, split and
describe files its own way, and reading them back to learn that costs a second pass. A task that
gets the table URI, storage options and its input paths works the same on ``local[N]`` and on
``k8s://`` executors, and the driver only collects small JSON results.

A Z-order (or clustering) bin holds a whole partition; above ``distribute_zorder_above`` input
bytes (or above ``max_task_input_bytes``, which no single task may load) it is not one task but
a Spark job of its own (``maintenance.zorder_spark``): inputs are read in parallel, rows are
range-partitioned by a bin-wide Z-order key and each range is written as one file, so no task
holds more than about one input or one output file. The driver still commits it like any bin.

The session is created lazily (the JVM start is most of a small run) and can be passed in, so
tests and benchmarks share one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from txntable import interrupts
from txntable.maintenance.errors import SparkJobError
from txntable.maintenance.executor_arrow import BinResult, BinTask, rewrite_bin
from txntable.maintenance.spark_session import start_session, stop
from txntable.maintenance.spark_support import spark_error_line
from txntable.maintenance.zorder_spark import zorder_bin

#: Z-order bins with more input bytes than this run distributed (``zorder_spark``): one task
#: holding a whole partition needs several times its Parquet bytes in memory (1.4 GB for a
#: 200 MB bin in docs/benchmarks.md), while a distributed task holds one output file; twice the
#: default target, since below that a distributed bin writes one or two files anyway
DISTRIBUTE_ZORDER_ABOVE = 256 * 1024 * 1024


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """The function a Spark task runs: a ``BinTask`` as a dict in, a ``BinResult`` dict out."""
    fields = dict(task)
    for key in (
        "inputs",
        "partition_columns",
        "zorder_by",
        "deletion_vectors",
        "base_row_ids",
        "row_commit_versions",
    ):
        fields[key] = tuple(fields.get(key) or ())
    return rewrite_bin(BinTask(**fields)).to_json()


def _import_worker(_: int) -> bool:
    import txntable.maintenance.executor_arrow

    return txntable.maintenance.executor_arrow.rewrite_bin is not None


class SparkExecutor:
    """Runs bins as tasks of one Spark job per batch, one partition (task) per bin."""

    name = "spark"

    def __init__(
        self,
        spark: Any | None = None,
        master: str = "local[2]",
        app_name: str = "txntable-optimize",
        conf: Mapping[str, str] | None = None,
        *,
        max_task_input_bytes: int | None = None,
        distribute_zorder_above: int | None = DISTRIBUTE_ZORDER_ABOVE,
    ) -> None:
        self._spark = spark
        self._owns_session = spark is None
        self.master = master
        self.app_name = app_name
        self.conf = dict(conf or {})
        #: no task loads more input bytes than this (None: no limit); a bin over it fails,
        #: unless it is a Z-order bin that can run distributed
        self.max_task_input_bytes = max_task_input_bytes
        #: Z-order bins above this many input bytes run distributed (None: never)
        self.distribute_zorder_above = distribute_zorder_above

    @property
    def spark(self) -> Any:
        """The session, started on first use."""
        if self._spark is None:
            self._spark = start_session(self.master, self.app_name, self.conf)
        return self._spark

    def warm_up(self) -> None:
        """Start the session and one Python worker per core (each imports txntable), so the
        first real bins do not pay for it; the start-up cost can then be measured apart."""
        sc = self.spark.sparkContext
        slots = max(1, int(sc.defaultParallelism))
        sc.parallelize(range(slots), slots).map(_import_worker).collect()

    def distributes(self, task: BinTask) -> bool:
        """Whether ``task`` runs as a distributed Z-order rather than one task."""
        if not task.zorder_by or self.distribute_zorder_above is None:
            return False
        limit = self.distribute_zorder_above
        if self.max_task_input_bytes is not None:
            limit = min(limit, self.max_task_input_bytes)
        return task.input_bytes > limit

    def run(self, tasks: Sequence[BinTask]) -> list[BinResult]:
        if self.max_task_input_bytes is not None:
            tasks = [replace(t, max_input_bytes=self.max_task_input_bytes) for t in tasks]
        big = [t for t in tasks if self.distributes(t)]
        small = [t for t in tasks if not self.distributes(t)]
        results = self._run_tasks(small)
        for task in big:  # each is a job over the whole cluster already
            results.append(zorder_bin(self.spark.sparkContext, task, self.max_task_input_bytes))
        return results

    def _run_tasks(self, tasks: Sequence[BinTask]) -> list[BinResult]:
        """One job, one task per bin."""
        if not tasks:
            return []
        payload = [asdict(t) for t in tasks]
        for item in payload:
            item["partition_values"] = dict(item["partition_values"])
            item["configuration"] = dict(item["configuration"])
            item["storage_options"] = dict(item["storage_options"])
        sc = self.spark.sparkContext
        sc.setJobDescription(f"txntable OPTIMIZE: {len(tasks)} bin(s)")
        rdd = sc.parallelize(payload, len(payload))
        try:
            done = rdd.map(run_task).collect()
        except Exception as exc:  # a task failed for good (bins report their own errors)
            interrupts.reraise(exc)  # or py4j's clean-up after Ctrl-C failed: still Ctrl-C
            raise SparkJobError(f"OPTIMIZE's Spark job failed: {spark_error_line(exc)}") from exc
        return [BinResult.from_json(r) for r in done]

    def close(self) -> None:
        """Stop the session if this executor started it (``spark_session.stop``: during Ctrl-C
        its processes are stopped without a word to Spark)."""
        if self._owns_session and self._spark is not None:
            session, self._spark = self._spark, None
            stop(session)
