"""Z-order of one bin spread over Spark tasks, for bins bigger than one task should hold.

A Z-order (or liquid-clustering) bin holds a whole partition; ``rewrite_bin`` loads it into one
task, which fails once the partition outgrows a worker's memory. Here no task holds more than
one input file or one output file:

1. **Sample** (one task per slice of inputs): each input is read as ``rewrite_bin`` reads it
   (``BinIO.read_conformed``: deletion vectors applied, row tracking filled, columns conformed)
   and a random sample of its Z-order columns comes back with its row count. The driver derives
   each column's bucket boundaries from the sample (``zorder.column_boundaries``), so the key no
   longer depends on which rows a task sees, and cuts the sampled keys into as many ranges as the
   bin writes files (``output_file_count``), as Spark's range partitioner does.
2. **Shuffle**: each input is read again, every row gets its bin-wide key and range
   (``zorder.global_zorder_key``, ``zorder.range_ids``), and the rows of each range travel as one
   Arrow IPC stream per (input, range) through Spark's shuffle, partitioned exactly by range.
3. **Write** (one task per range): a task concatenates its range, orders it by the key and
   writes it as one file with ``BinIO.write_chunk`` (our writer, statistics and tags); the
   ``add`` actions come back to the driver, which commits them as for any bin.

Why RDDs of Arrow IPC and not DataFrames with ``repartitionByRange``/``mapInArrow``: PySpark's
``mapInArrow`` needs pandas, which our images do not carry; Spark's rows would lose the Parquet
field ids column mapping needs and turn every timestamp into the session's zone; and the write
task holds its range anyway to compute statistics, so sorting it there in Arrow costs no more
memory than Spark's ``sortWithinPartitions`` would save. IPC streams keep the exact Arrow types.

The files of a run are named ``part-<range>-<one uuid per run>...``: a retried task attempt
rewrites its own file instead of leaving a second one, and after a failed job the driver finds
what the run wrote by that uuid and reports it for clean-up. Speculative execution must stay off
(Spark's default): two attempts of one range would write the same name.

Memory per task is bounded by ``max_task_input_bytes`` (Parquet bytes in storage, as the planner
counts them): an input file over it is refused from its footer before reading, and a range task
stops receiving once its rows' estimated bytes pass it; when the limit is set the bin is cut into
enough ranges that each stays well under it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable import interrupts
from txntable.engine.write.writer import data_file_name
from txntable.maintenance.errors import BinExecutionError
from txntable.maintenance.executor_arrow import (
    BinIO,
    BinResult,
    BinTask,
    check_task_input,
    output_file_count,
)
from txntable.maintenance.spark_support import from_ipc, spark_error_line, to_ipc
from txntable.maintenance.zorder import (
    bits_per_column,
    column_boundaries,
    global_zorder_key,
    range_ids,
    range_splits,
)

log = logging.getLogger(__name__)

#: rows of the Z-order columns sampled over a whole bin (at least this many per range too)
SAMPLE_ROWS = 100_000
SAMPLE_ROWS_PER_RANGE = 1_000
#: with ``max_task_input_bytes``, ranges are planned at most this share of it (sampling error)
RANGE_SHARE_OF_LIMIT = 0.8
#: the key travels with the rows under this name and is dropped before writing
KEY_COLUMN = "__txntable_zorder_key"
#: input slices per core for the sample and shuffle stages (evens out uneven files)
_TASKS_PER_CORE = 4
_PREFIX = "part-00000-"


@dataclass(frozen=True)
class RangePlan:
    """What every shuffle and write task needs: the bin-wide key and its ranges."""

    boundaries: tuple[bytes, ...]  # per Z-order column, the boundaries as an Arrow IPC stream
    splits: tuple[int, ...]  # range i holds keys above splits[i-1] and up to splits[i]
    ranges: int
    #: estimated Parquet bytes per row, for the write tasks' memory guard
    bytes_per_row: float
    max_bytes: int | None
    #: this run's file names: ``part-<range>-`` then this
    name_suffix: str

    def file_name(self, index: int) -> str:
        return f"part-{index:05d}-{self.name_suffix}"

    def column_boundaries(self) -> list[pa.Array]:
        return [from_ipc(b).column(0).combine_chunks() for b in self.boundaries]


def sample_inputs(
    task: BinTask, indices: Iterable[int], per_input: int, max_bytes: int | None
) -> Iterator[tuple[int, bytes]]:
    """Stage 1 (executor): per input, its live row count and a random sample of about
    ``per_input`` rows of its Z-order columns (IPC)."""
    io = BinIO(task)
    for index in indices:
        data = io.read_conformed(index, max_bytes).select(list(io.order_by))
        n = data.num_rows
        if n > per_input:
            chosen = pc.less(pc.random(n, initializer=index), per_input / n)
            data = data.filter(chosen)
        yield n, to_ipc(data)


def split_inputs(
    task: BinTask, indices: Iterable[int], plan: RangePlan
) -> Iterator[tuple[int, bytes]]:
    """Stage 2 (executor): each input's rows with their key, as one IPC stream per range."""
    io = BinIO(task)
    bounds = plan.column_boundaries()
    splits = pa.array(plan.splits, pa.uint64())
    for index in indices:
        data = io.read_conformed(index, plan.max_bytes)
        if KEY_COLUMN in data.column_names:  # pragma: no cover - a physical name never is
            raise BinExecutionError(f"the table has a column named {KEY_COLUMN}")
        key = global_zorder_key(data, io.order_by, bounds)
        ranges = range_ids(key, splits)
        order = pc.sort_indices(ranges)
        data = data.append_column(KEY_COLUMN, key).take(order)
        counts = pc.value_counts(ranges.take(order))  # sorted input: ranges in order
        offset = 0
        for item in counts.to_pylist():
            yield int(item["values"]), to_ipc(data.slice(offset, item["counts"]))
            offset += item["counts"]


def write_range(
    task: BinTask, plan: RangePlan, index: int, items: Iterable[tuple[int, bytes]]
) -> Iterator[dict[str, Any]]:
    """Stage 3 (executor): range ``index``'s rows ordered by key, written as one file."""
    parts, rows = [], 0
    for range_id, blob in items:
        if range_id != index:  # pragma: no cover - the partitioner is the identity
            raise BinExecutionError(f"range {range_id} reached the task of range {index}")
        part = from_ipc(blob)
        rows += part.num_rows
        estimate = int(rows * plan.bytes_per_row)
        check_task_input(f"key range {index} of bin {task.bin_id}", estimate, plan.max_bytes)
        parts.append(part)
    if not rows:
        return
    data = pa.concat_tables(parts)
    parts.clear()
    data = data.take(pc.sort_indices(data.column(KEY_COLUMN))).drop_columns([KEY_COLUMN])
    written: list[str] = []
    add = BinIO(task).write_chunk(data, written, name=plan.file_name(index))
    yield {"add": add, "path": written[0], "rows": data.num_rows}


def plan_ranges(
    task: BinTask,
    samples: Sequence[tuple[int, bytes]],
    order_by: Sequence[str],
    max_bytes: int | None,
) -> RangePlan | None:
    """The driver's step between the stages: boundaries and ranges from the samples (None:
    the bin has no live rows)."""
    total = sum(n for n, _ in samples)
    if total == 0:
        return None
    sample = pa.concat_tables([from_ipc(blob) for _, blob in samples])
    bits = bits_per_column(len(order_by))
    bounds = [column_boundaries(sample.column(c), bits) for c in order_by]
    ranges = output_file_count(task.input_bytes, task.target_file_size, len(task.inputs))
    if max_bytes is not None:
        ranges = max(ranges, math.ceil(task.input_bytes / (max_bytes * RANGE_SHARE_OF_LIMIT)))
    ranges = max(1, min(ranges, total))
    keys = global_zorder_key(sample, order_by, bounds)
    template = data_file_name()
    suffix = template.removeprefix(_PREFIX) if template.startswith(_PREFIX) else template
    return RangePlan(
        boundaries=tuple(to_ipc(pa.table({"b": b})) for b in bounds),
        splits=tuple(range_splits(keys, ranges).to_pylist()),
        ranges=ranges,
        bytes_per_row=task.input_bytes / total,
        max_bytes=max_bytes,
        name_suffix=suffix,
    )


def _slices(n: int, slots: int) -> list[list[int]]:
    count = max(1, min(n, slots * _TASKS_PER_CORE))
    return [list(range(i, n, count)) for i in range(count)]


def zorder_bin(spark_context: Any, task: BinTask, max_bytes: int | None = None) -> BinResult:
    """Z-order one bin over Spark tasks (see the module docstring); never raises: a failure
    comes back in the result with every file this run wrote, for clean-up."""
    start = time.monotonic()
    sc = spark_context
    plan: RangePlan | None = None
    io: BinIO | None = None
    try:
        io = BinIO(task)
        slices = _slices(len(task.inputs), max(1, int(sc.defaultParallelism)))
        want = max(
            SAMPLE_ROWS,
            SAMPLE_ROWS_PER_RANGE
            * output_file_count(task.input_bytes, task.target_file_size, len(task.inputs)),
        )
        per_input = max(1, math.ceil(want / max(1, len(task.inputs))))
        sc.setJobDescription(f"txntable OPTIMIZE: sample Z-order bin {task.bin_id}")
        samples = (
            sc.parallelize(slices, len(slices))
            .flatMap(lambda part: sample_inputs(task, part, per_input, max_bytes))
            .collect()
        )
        sampled = time.monotonic()
        plan = plan_ranges(task, samples, io.order_by, max_bytes)
        planned = time.monotonic()
        if plan is None:  # every row deleted: the inputs go, nothing is written
            return BinResult(task.bin_id, seconds=time.monotonic() - start)
        the_plan = plan
        sc.setJobDescription(
            f"txntable OPTIMIZE: Z-order bin {task.bin_id} in {plan.ranges} key ranges"
        )
        done = (
            sc.parallelize(slices, len(slices))
            .flatMap(lambda part: split_inputs(task, part, the_plan))
            .partitionBy(plan.ranges, lambda r: r)
            .mapPartitionsWithIndex(lambda i, items: write_range(task, the_plan, i, items))
            .collect()
        )
        log.info(
            "Z-order bin %s: %d rows in %d ranges over Spark tasks; sample %.1f s, plan %.1f s, "
            "shuffle and write %.1f s",
            task.bin_id,
            sum(d["rows"] for d in done),
            plan.ranges,
            sampled - start,
            planned - sampled,
            time.monotonic() - planned,
        )
        return BinResult(
            task.bin_id,
            adds=tuple(d["add"] for d in done),
            written=tuple(d["path"] for d in done),
            rows=sum(int(d["rows"]) for d in done),
            seconds=time.monotonic() - start,
        )
    except Exception as exc:  # the bin fails, the run goes on (as rewrite_bin reports)
        interrupts.reraise(exc)  # unless py4j's clean-up after Ctrl-C failed: that stops the run
        return BinResult(
            task.bin_id,
            written=_leftovers(io, plan),
            seconds=time.monotonic() - start,
            error=f"distributed Z-order failed: {spark_error_line(exc)}",
        )


def _leftovers(io: BinIO | None, plan: RangePlan | None) -> tuple[str, ...]:
    """The files this run wrote before failing: its names, found in the partition directory."""
    if io is None or plan is None:
        return ()
    try:
        listed = io.storage.list_dir(io.directory)
    except Exception:  # best effort: an orphan is only wasted space, VACUUM removes it
        log.warning("could not list %s for files of a failed Z-order", io.directory or "/")
        return ()
    return tuple(
        io.relative_path(f.name) for f in listed if f.name.endswith("-" + plan.name_suffix)
    )


__all__ = [
    "RangePlan",
    "plan_ranges",
    "sample_inputs",
    "split_inputs",
    "write_range",
    "zorder_bin",
]
