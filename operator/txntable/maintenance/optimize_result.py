"""What an OPTIMIZE run did, as one record: the job's result line and what the controller reads.

Why it exists apart from ``maintenance.optimize``: the record is what every side of a run
shares (the orchestrator fills it, ``jobs.optimize`` prints it, a VACUUM-only run builds an
empty one), while the orchestration is a long module of its own; keeping the record here keeps
both small.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class OptimizeResult:
    """The outcome of a run; ``to_json`` is the job's one result line."""

    table: str
    version: int
    read_version: int
    executor: str
    dry_run: bool = False
    num_files_removed: int = 0
    num_files_added: int = 0
    num_bytes_removed: int = 0
    num_bytes_added: int = 0
    bins_planned: int = 0
    bins_committed: int = 0
    bins_skipped: int = 0
    #: input bytes of bins that were rewritten but not committed (other writers got there
    #: first, or the table changed): work thrown away
    num_bytes_dropped: int = 0
    attempts: int = 0
    seconds: float = 0.0
    commits: list[int] = field(default_factory=list)
    #: bins not committed: ``binId``, ``reason`` and, for bins that were planned in a run,
    #: ``partitionValues`` (where other writers got in the way)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    run_id: str | None = None
    plan: dict[str, Any] | None = None
    #: the VACUUM that followed the compaction in the same run (``jobs.optimize --vacuum``)
    vacuum: dict[str, Any] | None = None
    #: the Parquet settings the files were written with (``ParquetWriteOptions.to_json``)
    parquet: dict[str, Any] | None = None
    #: partitions the plan left alone because other writers changed them recently
    #: (``DeferredPartition.to_json``); None when the policy avoids nothing
    deferred_partitions: list[dict[str, Any]] | None = None
    #: the highest peak memory (bytes) a rewrite task's process reported, and the input bytes
    #: of the largest bin rewritten: what the controller sizes the next run's executors by
    peak_task_memory: int = 0
    largest_bin_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "table": self.table,
            "version": self.version,
            "readVersion": self.read_version,
            "executor": self.executor,
            "dryRun": self.dry_run,
            "numFilesRemoved": self.num_files_removed,
            "numFilesAdded": self.num_files_added,
            "numBytesRemoved": self.num_bytes_removed,
            "numBytesAdded": self.num_bytes_added,
            "binsPlanned": self.bins_planned,
            "binsCommitted": self.bins_committed,
            "binsSkipped": self.bins_skipped,
            "numBytesDropped": self.num_bytes_dropped,
            "attempts": self.attempts,
            "seconds": round(self.seconds, 3),
            "commits": self.commits,
            "skipped": self.skipped,
            "error": self.error,
            "runId": self.run_id,
        }
        if self.plan is not None:
            out["plan"] = self.plan
        if self.vacuum is not None:
            out["vacuum"] = self.vacuum
        if self.parquet is not None:
            out["parquet"] = self.parquet
        if self.deferred_partitions is not None:
            out["deferredPartitions"] = self.deferred_partitions
        if self.peak_task_memory:
            out["peakTaskMemoryBytes"] = self.peak_task_memory
            out["largestBinBytes"] = self.largest_bin_bytes
        return out
