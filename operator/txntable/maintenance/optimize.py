"""OPTIMIZE orchestration, shared by every executor: plan, rewrite bins, commit in batches.

A run plans once, then for each batch of bins: the executor rewrites the bins (Arrow threads
here, Spark tasks on a cluster), and the batch is committed as one transaction of
``remove``/``add`` actions with ``dataChange=false`` (Delta's OPTIMIZE shape), which the
engine downgrades to SnapshotIsolation so concurrent appends never conflict with it.

Never fighting other writers: before committing a batch, every input of every bin is checked to
still be live at the latest version; a bin whose inputs a concurrent DELETE, OVERWRITE or other
OPTIMIZE removed is dropped and reported, never committed. If the commit itself loses a race
(``ConcurrentDeleteReadException`` and friends), the batch is re-checked against the new latest
version and retried with the bins that are still valid, a bounded number of times. Batches that
committed stay committed when a later one fails (partial progress).

Files written for bins that are not committed are deleted, best effort, but only when the run
knows their commit did not happen (dropped before committing, a conflict, a failed rewrite, the
log refusing the commit write: permission denied, a read-only file system): after an ambiguous
commit failure (e.g. a timeout while writing the commit file) they are left for VACUUM, because
deleting a file that a commit might reference would corrupt the table. Such failures are the
run's result (``error``), logged without a traceback: the command line prints them as one line.

On a clustered table (liquid clustering, ``maintenance.clustering``) the run clusters by the
table's clustering columns instead: the planner picks the files to re-cluster, the executors order
their rows by the Z-order key over those columns, and every file written for such a bin is
committed with ``clusteringProvider: "liquid"`` and the columns recorded as commitInfo's
``clusterBy``, as Delta records it. A Z-order policy on a clustered table is refused, as Delta
refuses ZORDER BY there.

Conflict-aware planning (``OptimizeOptions.avoid_recent_writes_ms``): before planning, the newest
commits are read (``engine.read.activity``, bounded by time and count) and the partitions other
writers changed within the window are deferred, so the run does not rewrite bytes that a DELETE or
MERGE still busy with the partition would make it drop. The result counts the bytes it did rewrite
and drop (``numBytesDropped``) and lists the deferred partitions.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import pyarrow as pa

from txntable import interrupts
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.commit.row_tracking import is_supported
from txntable.engine.commit.transaction import CommitOptions, Transaction
from txntable.engine.errors import (
    ConcurrentModificationException,
    EngineError,
    InvalidArgumentError,
    UnsupportedFeatureError,
)
from txntable.engine.model.actions import AddFile, RemoveFile
from txntable.engine.model.features import check_writable
from txntable.engine.model.iceberg_compat import materializes_partitions, row_tracking_field_ids
from txntable.engine.model.physical import partition_physical_names
from txntable.engine.model.predicates import bind
from txntable.engine.model.schema import to_arrow_type
from txntable.engine.read.activity import RecentActivity, read_recent_activity
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.table import Table
from txntable.engine.testhooks import pause_point
from txntable.engine.write.parquet_options import ParquetSettings, ParquetWriteOptions
from txntable.engine.write.parquet_options import resolve as resolve_parquet
from txntable.engine.write.writer import discard_files
from txntable.maintenance.batch import (
    expected_rows,
    inputs_unchanged,
    live_adds,
    operation_metrics,
    read_predicate,
    schema_changed,
)
from txntable.maintenance.clustering import LIQUID, clustering_columns, is_clustered
from txntable.maintenance.errors import InvalidPolicyError, MaintenanceError
from txntable.maintenance.executor_arrow import BinResult, BinTask
from txntable.maintenance.optimize_result import OptimizeResult
from txntable.maintenance.planner import (
    Avoidance,
    Bin,
    OptimizePlan,
    missing_row_counts,
    plan_optimize,
)
from txntable.maintenance.row_counts import footer_row_counts

log = logging.getLogger(__name__)

MAX_BATCH_ATTEMPTS = 10
#: Looked up at call time so tests can land a concurrent commit right after the input check.
_live_rows = live_adds


class BinExecutor(Protocol):
    """Runs bins somewhere (threads, Spark) and returns one result per task, in any order."""

    name: str

    def run(self, tasks: Sequence[BinTask]) -> list[BinResult]: ...


def _parquet(options: OptimizeOptions) -> ParquetSettings:
    """The Parquet settings a run asked for (unset ones: the table property or the default)."""
    return ParquetSettings(
        codec=options.compression,
        level=options.compression_level,
        row_group_rows=options.row_group_rows,
        dictionary=options.dictionary,
    )


def validate_policy(snapshot: Snapshot, options: OptimizeOptions) -> ParquetWriteOptions:
    """Refuse a predicate over data columns, Z-order columns the table cannot be clustered
    by (Spark's OPTIMIZE rejects both too) and Parquet settings that cannot be written (the
    policy's or the table's ``delta.parquet.compression.codec``), before any work; the Parquet
    settings the run writes with."""
    try:
        parquet = resolve_parquet(snapshot.metadata.configuration, _parquet(options))
    except InvalidArgumentError as exc:
        raise InvalidPolicyError(str(exc)) from None
    if options.where:
        try:
            bound = bind(options.where, snapshot.fields, snapshot.partition_columns)
        except InvalidArgumentError as exc:  # a malformed predicate: bad input, as below
            raise InvalidPolicyError(f"OPTIMIZE --where: {exc}") from None
        if bound.data:
            cols = sorted({c for conjunct in bound.data for c in conjunct.columns()})
            raise InvalidPolicyError(
                f"OPTIMIZE --where may only use partition columns "
                f"({', '.join(snapshot.partition_columns) or 'none'}); got {', '.join(cols)}"
            )
    if options.z_order_by and is_clustered(snapshot.protocol):
        raise InvalidPolicyError(
            f"cannot Z-order a clustered table (Z-order columns {', '.join(options.z_order_by)}): "
            "OPTIMIZE clusters it by its own clustering columns; drop --zorder-by (zOrderBy)"
        )
    by_name = {f.name: f for f in snapshot.fields}
    for col in options.z_order_by:
        f = by_name.get(col)
        if f is None:
            raise InvalidPolicyError(f"Z-order column {col!r} is not in the table schema")
        if col in snapshot.partition_columns:
            raise InvalidPolicyError(f"cannot Z-order by partition column {col!r}")
        if pa.types.is_nested(to_arrow_type(f.type)):
            raise InvalidPolicyError(f"cannot Z-order by nested column {col!r}")
    return parquet


def plan(
    table: Table,
    options: OptimizeOptions,
    snapshot: Snapshot | None = None,
    *,
    now_ms: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> OptimizePlan:
    """Plan against ``snapshot`` (latest by default); the files come from a transaction scan,
    so the partition predicate is parsed and checked by the engine. A clustered table is
    planned by its clustering columns. With ``options.avoid_recent_writes_ms``, partitions
    changed within that window before ``now_ms`` (default: now) are deferred. Files with a
    deletion vector and no ``numRecords`` are counted from their Parquet footers
    (``row_counts``; ``storage_options`` open those outside the table root)."""
    snap = snapshot or table.snapshot()
    check_writable(snap.protocol, snap.metadata, rows_unchanged=True)
    validate_policy(snap, options)
    cluster_by = clustering_columns(snap)
    files = Transaction(table, snap).scan(options.where)
    keys = partition_physical_names(
        snap.fields, snap.partition_columns, snap.metadata.configuration
    )
    avoid = None
    if options.avoid_recent_writes_ms is not None:
        activity = read_recent_activity(
            table.storage,
            snap.version,
            options.avoid_recent_writes_ms,
            partition_columns=snap.partition_columns,
            partition_keys=keys,
            now_ms=now_ms,
        )
        avoid = avoidance(activity, options.avoid_writes)
    counts = footer_row_counts(table.storage, missing_row_counts(files), storage_options)
    planned = plan_optimize(
        files,
        snap.partition_columns,
        options,
        snap.version,
        cluster_by=cluster_by,
        partition_keys=keys,
        avoid=avoid,
        row_counts=counts.rows,
    )
    if counts.unreadable:
        first, why = next(iter(counts.unreadable.items()))
        note = (
            f"{len(counts.unreadable)} file(s) with deletion vectors have no numRecords and no "
            f"readable footer, so no purge by their deleted share (first: {first}: {why})"
        )
        planned = replace(planned, notes=(*planned.notes, note))
    return planned


def avoidance(activity: RecentActivity, writes: str = "removes") -> Avoidance:
    """The partitions to defer from what the log says: those a commit removed files from in
    the window (``writes="removes"``), or any the window's commits touched (``"any"``), each
    with a reason naming the operations and how long ago the newest one committed."""
    removes_only = writes == "removes"
    hot = activity.written_since(activity.since_ms, removes_only=removes_only)
    partitions: dict[tuple[str | None, ...], tuple[str, int | None]] = {}
    for key, last in hot.items():
        act = activity.partitions[key]
        n = act.removing_commits if removes_only else act.commits
        what = "removed files" if removes_only else "wrote"
        ago = max(0, (activity.until_ms - last) // 1000)
        ops = ", ".join(sorted(act.removing_operations if removes_only else act.operations))
        reason = f"{n} commit(s) {what} here in the window ({ops}), last {ago}s ago"
        partitions[key] = (reason, last)
    window_s = (activity.until_ms - activity.since_ms) / 1000
    summary = {
        "windowSeconds": window_s,
        "writes": writes,
        "commitsRead": activity.commits,
        "newestVersion": activity.newest_version,
        "oldestVersion": activity.oldest_version,
        "complete": activity.complete,
        "partitionsWritten": len(activity.partitions),
        "partitionsWithRemoves": sum(1 for a in activity.partitions.values() if a.removing_commits),
        "removesWithoutPartition": activity.removes_without_partition,
        "tableWideChanges": len(activity.table_wide),
    }
    return Avoidance(partitions, summary)


def optimize(
    table: Table,
    options: OptimizeOptions,
    executor: BinExecutor,
    *,
    storage_options: Mapping[str, Any] | None = None,
    commit_options: CommitOptions | None = None,
    dry_run: bool = False,
) -> OptimizeResult:
    """Run OPTIMIZE on ``table``; conflicts with other writers are absorbed and reported."""
    started = time.monotonic()
    start_ms = int(time.time() * 1000)
    snapshot = table.snapshot()
    the_plan = plan(table, options, snapshot, storage_options=storage_options)
    result = OptimizeResult(
        table=table.uri,
        version=snapshot.version,
        read_version=snapshot.version,
        executor=executor.name,
        dry_run=dry_run,
        bins_planned=len(the_plan.bins),
    )
    if options.avoid_recent_writes_ms is not None:
        result.deferred_partitions = [d.to_json() for d in the_plan.deferred_partitions]
    if dry_run:
        result.plan = the_plan.to_json()
        result.seconds = time.monotonic() - started
        return result
    run = _Run(
        table,
        snapshot,
        options,
        executor,
        storage_options=storage_options or {},
        commit_options=commit_options,
        start_ms=start_ms,
        cluster_by=the_plan.cluster_by,
        row_counts=the_plan.row_counts,
    )
    result.run_id = run.commit_options.run_id
    result.parquet = run.parquet.to_json()
    try:
        batches = the_plan.batches()
        for i, batch in enumerate(batches):
            if not run.run_batch(batch, result):
                for rest in batches[i + 1 :]:
                    for b in rest:
                        result.skipped.append(
                            {"binId": b.bin_id, "reason": "not run: table changed"}
                        )
                    result.bins_skipped += len(rest)
                break
    except (EngineError, MaintenanceError) as exc:  # an expected failure: the result says it
        interrupts.reraise(exc)  # an interrupt a library turned into an error stays one
        result.error = f"{type(exc).__name__}: {exc}"
        log.info(
            "optimize of %s failed after %d commit(s): %s", table.uri, len(result.commits), exc
        )
    except Exception as exc:  # a defect: keep its traceback in the log
        interrupts.reraise(exc)
        result.error = f"{type(exc).__name__}: {exc}"
        log.exception("optimize of %s failed after %d commit(s)", table.uri, len(result.commits))
    failed = [s for s in result.skipped if s["reason"].startswith("rewrite failed")]
    if result.error is None and failed and result.bins_committed == 0:
        # nothing was compacted and it was not for lack of work: the run failed (bins dropped
        # because other writers got there first are not failures)
        result.error = f"every bin that ran failed ({len(failed)}), e.g. {failed[0]['reason']}"
    result.seconds = time.monotonic() - started
    return result


class _Run:
    """State of one run across its batches."""

    def __init__(
        self,
        table: Table,
        snapshot: Snapshot,
        options: OptimizeOptions,
        executor: BinExecutor,
        *,
        storage_options: Mapping[str, Any],
        commit_options: CommitOptions | None,
        start_ms: int,
        cluster_by: tuple[str, ...] | None = None,
        row_counts: Mapping[str, int] | None = None,
    ) -> None:
        self.table = table
        self.snapshot = snapshot
        self.options = options
        self.executor = executor
        self.storage_options = dict(storage_options)
        base = commit_options or CommitOptions()
        self.commit_options = replace(base, run_id=base.run_id or str(uuid.uuid4()))
        self.start_ms = start_ms
        self.cluster_by = cluster_by
        #: rows of inputs without ``numRecords``, from their footers (the plan's)
        self.row_counts = dict(row_counts or {})
        self._row_values: dict[str, tuple[int | None, int | None]] | None = None
        self._bin_bytes: dict[str, int] = {}
        self._bin_partitions: dict[str, dict[str, str | None]] = {}
        #: resolved once for the run (``plan`` already refused invalid settings)
        self.parquet = resolve_parquet(snapshot.metadata.configuration, _parquet(options))

    def task(self, b: Bin) -> BinTask:
        meta = self.snapshot.metadata
        base_row_ids, row_commit_versions = self._row_tracking(b)
        return BinTask(
            table_uri=self.table.uri,
            bin_id=b.bin_id,
            inputs=b.paths,
            input_bytes=b.total_bytes,
            partition_columns=tuple(meta.partition_columns),
            partition_values=dict(b.partition_values),
            schema_string=meta.schema_string,
            configuration=dict(meta.configuration),
            target_file_size=self.options.target_file_size,
            zorder_by=self._order_by(b),
            storage_options=self.storage_options,
            deletion_vectors=b.deletion_vectors,
            base_row_ids=base_row_ids,
            row_commit_versions=row_commit_versions,
            parquet=self.parquet.to_json(),
            materialize_partitions=materializes_partitions(
                self.snapshot.protocol, meta.configuration
            ),
            row_lineage_ids=row_tracking_field_ids(self.snapshot.protocol, meta.configuration),
        )

    def _row_tracking(self, b: Bin) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
        """Each input's (baseRowId, defaultRowCommitVersion) as planned, aligned with the bin's
        paths; empty unless the table tracks rows (the rewrite then preserves them)."""
        if not is_supported(self.snapshot.protocol):
            return (), ()
        if self._row_values is None:
            files = self.snapshot.files(stats=False).select(
                ["path", "baseRowId", "defaultRowCommitVersion"]
            )
            self._row_values = {
                r["path"]: (r["baseRowId"], r["defaultRowCommitVersion"]) for r in files.to_pylist()
            }
        values = [self._row_values.get(p, (None, None)) for p in b.paths]
        return tuple(v[0] for v in values), tuple(v[1] for v in values)

    def _order_by(self, b: Bin) -> tuple[str, ...]:
        """Columns whose Z-order key orders the bin's rows: the clustering columns for a
        clustering bin, the policy's for a Z-order bin, none for plain compaction."""
        if b.clustered:
            return tuple(self.cluster_by or ())
        return self.options.z_order_by if b.zorder else ()

    def cleanup(self, results: Sequence[BinResult]) -> None:
        for r in results:
            for relative in r.written:
                try:
                    self.table.storage.delete(relative)
                except Exception:  # best effort: an orphan is only wasted space
                    log.warning("could not delete uncommitted file %s", relative)

    def _after_failed_commit(
        self, txn: Transaction, results: Sequence[BinResult], exc: EngineError
    ) -> None:
        """The files written for a batch whose commit failed: deleted when it certainly did not
        land (the log refused the write), else kept for VACUUM and named in ``exc``, because a
        commit that may have landed could reference them."""
        written = [w for r in results for w in r.written]
        if not txn.may_have_landed:
            discard_files(self.table.storage, written, exc)
        elif written:
            exc.leave_files(written, "the commit may have landed")

    def run_batch(self, batch: list[Bin], result: OptimizeResult) -> bool:
        """Rewrite and commit one batch; False when the run must stop (metadata changed)."""
        by_id = {b.bin_id: b for b in batch}
        self._bin_bytes.update({b.bin_id: b.total_bytes for b in batch})
        self._bin_partitions.update({b.bin_id: b.partition_values for b in batch})
        results = self.executor.run([self.task(b) for b in batch])
        pause_point("optimize:rewritten")  # tests: another writer commits here
        result.peak_task_memory = max([result.peak_task_memory, *(r.peak_memory for r in results)])
        result.largest_bin_bytes = max([result.largest_bin_bytes, *(b.total_bytes for b in batch)])
        for r in results:
            if not r.ok:
                self._skip([r], f"rewrite failed: {r.error}", result)
        pending = {r.bin_id: r for r in results if r.ok}
        last_conflict = ""
        for _ in range(MAX_BATCH_ATTEMPTS):
            if not pending:
                break
            latest = self.table.snapshot()
            if schema_changed(self.snapshot, latest):
                self._skip(pending.values(), "table schema changed since planning", result)
                return False
            try:
                check_writable(latest.protocol, latest.metadata, rows_unchanged=True)
            except UnsupportedFeatureError as exc:
                self._skip(pending.values(), f"protocol changed: {exc}", result)
                return False
            live = _live_rows(latest, [p for bid in pending for p in by_id[bid].paths])
            gone = [bid for bid in pending if not all(p in live for p in by_id[bid].paths)]
            self._skip([pending.pop(bid) for bid in gone], "inputs removed concurrently", result)
            stale = [bid for bid in pending if not inputs_unchanged(by_id[bid], live)]
            reason = "rows deleted from inputs concurrently (their deletion vectors changed)"
            self._skip([pending.pop(bid) for bid in stale], reason, result)
            wrong = [
                bid
                for bid in pending
                if expected_rows(live, by_id[bid].paths, self.row_counts)
                not in (None, pending[bid].rows)
            ]
            for bid in wrong:  # a guard: never swap files whose row counts disagree
                self._skip([pending.pop(bid)], "row count differs from the inputs' stats", result)
            if not pending:
                break
            try:
                self._commit(
                    latest, [by_id[b] for b in pending], list(pending.values()), live, result
                )
                return True
            except ConcurrentModificationException as exc:
                # metadata/protocol changes too: the next round re-checks schema and features
                result.attempts += 1
                last_conflict = type(exc).__name__
                log.info("optimize batch lost a race (%s); re-checking inputs", exc)
        if pending:
            reason = f"gave up after {MAX_BATCH_ATTEMPTS} conflicts ({last_conflict})"
            self._skip(pending.values(), reason, result)
        return True

    def _skip(self, results: Iterable[BinResult], reason: str, out: OptimizeResult) -> None:
        items = list(results)
        for r in items:
            entry: dict[str, Any] = {"binId": r.bin_id, "reason": reason}
            if r.bin_id in self._bin_partitions:
                entry["partitionValues"] = dict(self._bin_partitions[r.bin_id])
            out.skipped.append(entry)
            if r.ok:  # rewritten, then thrown away
                out.num_bytes_dropped += self._bin_bytes.get(r.bin_id, 0)
        out.bins_skipped += len(items)
        self.cleanup(items)

    def _commit(
        self,
        latest: Snapshot,
        bins: list[Bin],
        results: list[BinResult],
        live: Mapping[str, AddFile],
        out: OptimizeResult,
    ) -> None:
        txn = Transaction(self.table, latest, self.commit_options)
        # read: the batch's partitions, and of their files only the ones it compacts (Spark's
        # trackFilesRead), so a writer that removes another file there is no conflict
        txn.scan(
            read_predicate(self.options.where, latest.partition_columns, bins), track_files=False
        )
        txn.track_read_files([p for b in bins for p in b.paths])
        removes: list[RemoveFile] = [
            live[p].to_remove(deletion_timestamp=self.start_ms, data_change=False)
            for b in bins
            for p in b.paths
        ]
        clustered = {b.bin_id for b in bins if b.clustered}
        adds = [
            replace(add, clustering_provider=LIQUID) if r.bin_id in clustered else add
            for r in results
            for add in (AddFile.from_json(a) for a in r.adds)
        ]
        txn.add(*removes, *adds)
        removed_bytes = sum(r.size or 0 for r in removes)
        added_bytes = sum(a.size for a in adds)
        # tests: another writer commits between this transaction's snapshot and its commit, so
        # the engine's conflict checker (not the input check above) must judge that commit
        pause_point("optimize:committing")
        try:
            committed = txn.commit(
                "OPTIMIZE",
                {
                    "predicate": json.dumps([self.options.where] if self.options.where else []),
                    "zOrderBy": json.dumps(list(self.options.z_order_by)),
                    "clusterBy": json.dumps(list(self.cluster_by or ())),
                    "auto": False,
                },
                operation_metrics(removes, adds),
            )
        except ConcurrentModificationException:
            raise  # run_batch re-checks the bins and retries; their files are still wanted
        except EngineError as exc:
            self._after_failed_commit(txn, results, exc)
            raise
        out.version = committed.version
        out.commits.append(committed.version)
        out.attempts += committed.attempts
        out.bins_committed += len(bins)
        out.num_files_removed += len(removes)
        out.num_files_added += len(adds)
        out.num_bytes_removed += removed_bytes
        out.num_bytes_added += added_bytes


__all__ = [
    "BinExecutor",
    "OptimizeResult",
    "avoidance",
    "optimize",
    "plan",
    "validate_policy",
]
