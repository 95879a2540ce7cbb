"""The next compaction run's plan, computed by the controller from its ``TableSummary``.

A user (or a GitOps diff) should see what the next run will do before it runs: how many bins,
files and bytes, in which partitions, what a VACUUM would reclaim, and how long it should take.
The real planner (``maintenance.planner.plan_optimize``) needs a snapshot with every ``add``'s
path, statistics and tags; the controller keeps only the summary (per live file: key hash, size,
partition id, deletion-vector cardinality), so this module runs the planner's own packing kernel
(``maintenance.packing``) on those columns: per partition (in the planner's order), the files
under the minimum size packed first-fit-decreasing up to the target size, bins with fewer than
``min_input_files`` files dropped, then the ``max_bytes_per_run`` limit over the bins in plan order.
Files of equal size are interchangeable to first-fit-decreasing, so the bins' sizes, files and
bytes per partition equal the real planner's (``tests/unit/reconcile/test_plan.py`` checks it on
generated tables).

Where the summary lacks what the planner reads, the plan is an estimate and says so
(``exact=False`` plus a note); the run re-plans from its own snapshot:

* deletion vectors: the purge rule (a vector hiding at least ``dv_purge_ratio`` of the file's
  rows rewrites the file whatever its size) needs ``numRecords``, which the summary does not
  keep; files with vectors are planned by size only (the bins are a lower bound) and
  ``files_with_deletion_vectors`` is an upper bound of the files a purge adds;
* Z-order: every partition with two files or more is one bin (the summary does not keep the
  tag that says a partition is already Z-ordered, an upper bound);
* clustered tables: the small files of a partition form one bin (the summary does not keep
  ``clusteringProvider``);
* ``avoid_recent_writes_ms``: partitions other writers are changing may be deferred by the run.

``plan_id`` hashes the plan's content (partition values and the sorted sizes of each bin, the
deferred bins, the VACUUM figures), not the table version or any time, so it changes only when
the work changes: a commit to a compacted partition leaves it as it was. What
``CompactionPolicy.spec.requireApproval`` approves (annotation ``txntable.io/approve-plan``) is
``versioned_plan_id``: that hash with the log version the work was first planned at, so one
approval starts one run, never a later run on the same work.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from txntable.api.optimize_options import OptimizeOptions
from txntable.api.table import PlannedPartition, PlanResources, PlanStatus
from txntable.engine import (
    InvalidArgumentError,
    TableSummary,
    bind,
    parse_schema,
    retention,
    typed_partition_values,
)
from txntable.maintenance.clustering import is_clustered
from txntable.maintenance.packing import bins_within, pack_partition, partition_order

#: Partitions listed in a plan's status (the largest by input bytes): status must stay small.
TOP_PARTITIONS = 5
#: Finished runs whose throughput makes the duration estimate (the newest ones).
RATE_RUNS = 5
#: Characters of ``plan_id`` (hex of a SHA-256).
PLAN_ID_LENGTH = 12
#: Bounds of the status view (the CRD's maxLength).
PARTITION_TEXT_LENGTH = 1024
NOTE_LENGTH = 2048

PartitionKey = tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class PartitionWork:
    """The bins a plan has in one partition (``values``: column name -> raw value)."""

    values: tuple[tuple[str, str | None], ...]
    bins: int
    files: int
    bytes: int


@dataclass(frozen=True, slots=True)
class VacuumWork:
    """What a VACUUM would reclaim now: removed files past the retention, and their bytes."""

    files: int
    bytes: int


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What the next compaction run would do, from the controller's summary at ``version``."""

    version: int
    #: bins, files and bytes the run rewrites (within ``max_bytes``)
    bins: int
    input_files: int
    input_bytes: int
    #: the biggest single bin (one task rewrites one bin: what sizes an executor's memory)
    largest_bin_bytes: int
    #: bins past the ``max_bytes`` limit, left for a later run
    deferred_bins: int
    deferred_bytes: int
    #: every partition with a bin, largest input first
    partitions: tuple[PartitionWork, ...]
    #: live files carrying a deletion vector: at most this many are purged besides the bins
    files_with_deletion_vectors: int
    vacuum: VacuumWork | None
    #: False when the summary could not decide something the run's planner will (see notes)
    exact: bool
    notes: tuple[str, ...]
    plan_id: str
    #: bytes per second of recent runs and how many runs that is from (None: none known)
    bytes_per_second: int | None = None
    rate_runs: int = 0
    #: every partition with a bin, the ones ``max_bytes`` leaves for later too (plan order)
    bin_partitions: tuple[PartitionKey, ...] = ()

    @property
    def estimated_seconds(self) -> int | None:
        """The run's expected duration from past runs' throughput (None: unknown)."""
        if self.bytes_per_second is None or self.bytes_per_second <= 0:
            return None
        return max(1, -(-self.input_bytes // self.bytes_per_second))

    def top_partitions(self, limit: int = TOP_PARTITIONS) -> tuple[PartitionWork, ...]:
        return self.partitions[:limit]


@dataclass(frozen=True, slots=True)
class RunRate:
    """Throughput learnt from finished compaction runs (bytes rewritten per wall second)."""

    bytes_per_second: int
    runs: int


@dataclass
class _Bins:
    key: PartitionKey
    sizes: list[list[int]] = field(default_factory=list)


def plan_from_summary(
    summary: TableSummary,
    options: OptimizeOptions,
    *,
    vacuum_retention_ms: int | None = None,
    vacuum: bool = False,
    now_ms: int | None = None,
    rate: RunRate | None = None,
) -> CompactionPlan:
    """The plan the real planner would make for ``policy`` on the snapshot ``summary`` sums up
    (see the module docstring for where it is an estimate). ``options.where`` must be a
    partition predicate; ``vacuum``: the run ends with VACUUM (its figures then count, with
    ``vacuum_retention_ms`` the policy's retention, at least the table's). Raises
    ``InvalidArgumentError`` for a predicate that does not bind to the table."""
    notes: list[str] = []
    names = summary.partition_columns
    selected = _selected_partitions(summary, options.where)
    groups = _group(summary, selected)
    zorder = bool(options.z_order_by)
    clustered = is_clustered(summary.protocol)
    planned: list[_Bins] = []
    for key in sorted(groups, key=partition_order):
        sizes = groups[key]
        if zorder:
            made = [sorted(sizes, reverse=True)] if len(sizes) >= 2 else []
        elif clustered:
            small = [s for s in sizes if s < options.effective_min_file_size]
            made = [sorted(small, reverse=True)] if len(small) >= options.min_input_files else []
        else:
            made = _pack(sizes, options)
        if made:
            planned.append(_Bins(key, made))
    chosen, deferred = _limit(planned, options.max_bytes_per_run)
    dv_files = _files_with_dvs(summary, selected)
    exact = True
    if dv_files:
        exact = False
        notes.append(
            f"{dv_files} file(s) carry deletion vectors; the run also rewrites those whose vector "
            f"hides at least {options.dv_purge_ratio:.0%} of their rows (row counts are not kept "
            "by the controller)"
        )
    if zorder:
        exact = False
        notes.append(
            "Z-order: every partition with two files or more is counted; partitions already "
            "Z-ordered on these columns are skipped by the run"
        )
    if clustered:
        exact = False
        notes.append("clustered table: the run re-clusters unclustered files too")
    if options.avoid_recent_writes_ms is not None:
        exact = False
        notes.append("partitions other writers changed recently may be deferred by the run")
    if deferred:
        notes.append(
            f"{sum(len(b.sizes) for b in deferred)} bin(s) left for a later run by maxBytesPerRun"
        )
    swept = _vacuum_work(summary, vacuum_retention_ms, now_ms) if vacuum else None
    partitions = _partition_work(chosen, names)
    all_bins = [s for b in chosen for s in b.sizes]
    return CompactionPlan(
        version=summary.version,
        bins=len(all_bins),
        input_files=sum(len(s) for s in all_bins),
        input_bytes=sum(sum(s) for s in all_bins),
        largest_bin_bytes=max((sum(s) for s in all_bins), default=0),
        deferred_bins=sum(len(b.sizes) for b in deferred),
        deferred_bytes=sum(sum(s) for b in deferred for s in b.sizes),
        partitions=partitions,
        files_with_deletion_vectors=dv_files,
        vacuum=swept,
        exact=exact,
        notes=tuple(notes),
        plan_id=_plan_id(names, chosen, deferred, swept),
        bytes_per_second=rate.bytes_per_second if rate else None,
        rate_runs=rate.runs if rate else 0,
        bin_partitions=tuple(b.key for b in planned),
    )


def all_bins_deferred(plan: CompactionPlan, hot: Iterable[PartitionKey]) -> bool:
    """Whether a run of ``plan`` would defer every bin to other writers (conflict-aware
    planning defers the partitions in ``hot``, as ``maintenance.planner`` does): there are bins,
    each in a hot partition, and no file with a deletion vector the run might purge elsewhere."""
    written = set(hot)
    return (
        bool(plan.bin_partitions)
        and not plan.files_with_deletion_vectors
        and all(key in written for key in plan.bin_partitions)
    )


def versioned_plan_id(work_id: str, version: int, shown: str | None, spent: str | None) -> str:
    """The planId status shows and an approval names: ``<work>-v<version>``, the hash of the
    work and the log version it was first planned at. It stays what status ``shown`` while the
    work is the same and its approval was not spent, so commits that change nothing the run
    would do keep it; once spent (a run started on it), the same work gets a new id, so an
    approval starts one run: the same work arriving later, or a retry, needs a new approval."""
    if shown is not None and shown != spent and shown.split("-v", 1)[0] == work_id:
        return shown
    made = f"{work_id}-v{version}"
    if spent is not None and (spent == made or spent.startswith(made + "-")):
        tail = spent[len(made) + 1 :]
        made = f"{made}-{int(tail) + 1 if tail.isdigit() else 2}"
    return made


def learn_rate(runs: Iterable[tuple[int, float]], known: RunRate | None = None) -> RunRate | None:
    """Throughput from finished runs, newest first, as (input bytes, wall seconds): the bytes
    of the newest ``RATE_RUNS`` runs that rewrote something over their seconds. Without such
    runs (their results are gone, or the backend reports none) ``known`` stays."""
    usable = [(b, s) for b, s in runs if b > 0 and s > 0][:RATE_RUNS]
    if not usable:
        return known
    total_bytes = sum(b for b, _ in usable)
    total_seconds = sum(s for _, s in usable)
    return RunRate(max(1, int(total_bytes / total_seconds)), len(usable))


# -- the summary's columns ----------------------------------------------------------------------
def _normalised(summary: TableSummary) -> list[PartitionKey]:
    """Each partition id's key as the planner groups files: an empty string is null."""
    return [tuple(None if v == "" else v for v in p) for p in summary.partitions]


def _selected_partitions(summary: TableSummary, where: str | None) -> pa.Array | None:
    """Per partition id, whether ``where`` selects it (None: every partition)."""
    if where is None:
        return None
    fields = parse_schema(summary.metadata.schema_string)
    bound = bind(where, fields, summary.partition_columns)
    if bound.data:
        raise InvalidArgumentError(
            f"the plan's predicate may only use partition columns: {where!r}"
        )
    physical = {f.name: f.physical_name for f in fields}
    keys = [physical.get(c, c) for c in summary.partition_columns]
    raw = [dict(zip(keys, p, strict=True)) for p in summary.partitions]
    typed = typed_partition_values(raw, fields, summary.partition_columns)
    if not summary.partitions:
        return pa.array([], pa.bool_())
    return bound.matches(typed)


def _group(summary: TableSummary, selected: pa.Array | None) -> dict[PartitionKey, list[int]]:
    """Sizes of the live files by normalised partition key, in the selected partitions."""
    files = summary.files
    if selected is not None and files.num_rows:
        files = files.filter(pc.take(selected, files.column("partition")))
    keys = _normalised(summary)
    out: dict[PartitionKey, list[int]] = {}
    if not files.num_rows:
        return out
    # sorted by partition id, so each partition is one slice (no Python step per file)
    order = pc.sort_indices(files, sort_keys=[("partition", "ascending")])
    parts = pc.take(files.column("partition"), order)
    sizes = pc.take(files.column("size"), order).to_pylist()
    starts = [
        0,
        *(e + 1 for e in pc.indices_nonzero(pc.not_equal(parts[1:], parts[:-1])).to_pylist()),
    ]
    ids = pc.take(parts, pa.array(starts, pa.int64())).to_pylist()
    for pid, start, end in zip(ids, starts, [*starts[1:], len(sizes)], strict=True):
        key = keys[pid]
        if key in out:  # "" and null are one partition to the planner
            out[key].extend(sizes[start:end])
        else:
            out[key] = sizes[start:end]
    return out


def _files_with_dvs(summary: TableSummary, selected: pa.Array | None) -> int:
    files = summary.files
    if selected is not None and files.num_rows:
        files = files.filter(pc.take(selected, files.column("partition")))
    column = files.column("dv_rows")
    return int(len(column) - column.null_count)


def _vacuum_work(summary: TableSummary, policy_ms: int | None, now_ms: int | None) -> VacuumWork:
    """Tombstones older than the longer of the table's and the policy's retention (as
    ``health`` counts reclaimable bytes, with the policy's retention on top)."""
    tombs = summary.tombstones
    if not tombs.num_rows:
        return VacuumWork(0, 0)
    try:
        keep = retention.duration_ms(
            summary.configuration,
            retention.DELETED_FILE_RETENTION,
            retention.DEFAULT_DELETED_FILE_RETENTION_MS,
        )
    except InvalidArgumentError:
        return VacuumWork(0, 0)  # VACUUM refuses a broken property: nothing is reclaimed
    keep = max(keep or 0, policy_ms or 0)
    if now_ms is None:
        import time

        now_ms = int(time.time() * 1000)
    old = pc.less(pc.fill_null(tombs.column("deletion_timestamp"), now_ms), now_ms - keep)
    sizes = pc.filter(tombs.column("size"), old)
    return VacuumWork(len(sizes), int(pc.sum(sizes).as_py() or 0))


# -- the planner's rules on sizes -----------------------------------------------------------------
def _pack(sizes: list[int], options: OptimizeOptions) -> list[list[int]]:
    """The planner's packing (``packing.pack_partition``) without the purge rule, as sizes."""
    return [list(map(sizes.__getitem__, members)) for members in pack_partition(sizes, options)]


def _limit(planned: list[_Bins], limit: int | None) -> tuple[list[_Bins], list[_Bins]]:
    """The planner's byte limit (``packing.bins_within``) over the bins in plan order."""
    flat = [sum(sizes) for group in planned for sizes in group.sizes]
    left = bins_within(flat, limit)
    if left == len(flat):
        return planned, []
    chosen: list[_Bins] = []
    deferred: list[_Bins] = []
    for group in planned:
        taken = min(left, len(group.sizes))
        left -= taken
        if taken:
            chosen.append(_Bins(group.key, group.sizes[:taken]))
        if taken < len(group.sizes):
            deferred.append(_Bins(group.key, group.sizes[taken:]))
    return chosen, deferred


def _partition_work(chosen: list[_Bins], names: Sequence[str]) -> tuple[PartitionWork, ...]:
    work = [
        PartitionWork(
            values=tuple(zip(names, b.key, strict=True)),
            bins=len(b.sizes),
            files=sum(len(s) for s in b.sizes),
            bytes=sum(sum(s) for s in b.sizes),
        )
        for b in chosen
    ]
    order = {id(w): i for i, w in enumerate(work)}
    return tuple(sorted(work, key=lambda w: (-w.bytes, order[id(w)])))


def _plan_id(
    names: Sequence[str], chosen: list[_Bins], deferred: list[_Bins], swept: VacuumWork | None
) -> str:
    """A hash of the work itself (stable across ticks, processes and restarts)."""
    doc = {
        "columns": list(names),
        "bins": [[list(b.key), [sorted(s) for s in b.sizes]] for b in chosen],
        "deferred": [[list(b.key), [sorted(s) for s in b.sizes]] for b in deferred],
        "vacuum": None if swept is None else [swept.files, swept.bytes],
    }
    text = json.dumps(doc, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:PLAN_ID_LENGTH]


# -- the policy in, the status out --------------------------------------------------------------
def _partition_text(values: tuple[tuple[str, str | None], ...]) -> str:
    """A partition as a predicate of the engine's SQL subset (``p = 'a' AND q IS NULL``)."""
    parts = []
    for name, value in values:
        column = name if name.isidentifier() else "`" + name.replace("`", "``") + "`"
        if value is None:
            parts.append(f"{column} IS NULL")
        else:
            quoted = value.replace("\\", "\\\\").replace("'", "\\'")
            parts.append(f"{column} = '{quoted}'")
    text = " AND ".join(parts)
    return text if len(text) <= PARTITION_TEXT_LENGTH else text[: PARTITION_TEXT_LENGTH - 3] + "..."


def plan_status(plan: CompactionPlan, resources: PlanResources | None = None) -> PlanStatus:
    """The small view of ``plan`` kept in ``TxnTable.status.plan`` (no version, no time: it
    changes only when the work, the estimate, the resources or the notes change);
    ``resources``: what the run would be launched with (the controller's run sizer)."""
    note = "; ".join(plan.notes)
    if len(note) > NOTE_LENGTH:
        note = note[: NOTE_LENGTH - 3] + "..."
    return PlanStatus(
        plan_id=plan.plan_id,
        bins=plan.bins,
        files=plan.input_files,
        input_bytes=plan.input_bytes,
        largest_bin_bytes=plan.largest_bin_bytes,
        deferred_bins=plan.deferred_bins,
        partitions=tuple(
            PlannedPartition(
                partition=_partition_text(w.values), bins=w.bins, files=w.files, bytes=w.bytes
            )
            for w in plan.top_partitions()
        ),
        vacuum_files=plan.vacuum.files if plan.vacuum else None,
        vacuum_bytes=plan.vacuum.bytes if plan.vacuum else None,
        estimated_seconds=plan.estimated_seconds,
        resources=resources,
        exact=plan.exact,
        note=note or None,
    )
