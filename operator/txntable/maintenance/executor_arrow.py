"""Rewriting one bin, and the local executor that rewrites bins in threads of this process.

``rewrite_bin`` is the unit of work every executor runs: read the bin's input files with
pyarrow, conform them to the table's physical layout (``engine.model.physical``: physical names and
field ids under column mapping, every column in its current type; older files may lack a column,
store a narrower type or a timestamp as INT96), optionally order the rows by the Z-order key, and
write new Parquet files with fresh unique names into the bin's partition directory (partition
values keyed as the log keys them), each described by an ``add`` action
(``dataChange=false``, full Delta statistics computed from the rows written, so null counts of
nested columns are included, which Parquet footers cannot give). It takes and returns plain
JSON-shaped values so a Spark task can run it unchanged on any executor, local or on Kubernetes:
the task only needs the table URI and the storage options.

A failing bin returns its error and the files it managed to write, so the orchestrator can
delete them; the bin's inputs stay live. Nothing here commits.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from txntable.engine.commit.row_tracking import preserved_columns
from txntable.engine.model.actions import AddFile
from txntable.engine.model.deletion_vectors import deleted_rows, keep_mask
from txntable.engine.model.iceberg_compat import ROW_COMMIT_VERSION_FIELD_ID, ROW_ID_FIELD_ID
from txntable.engine.model.physical import FIELD_ID_KEY, PhysicalLayout, conform_table
from txntable.engine.model.stats import StatsConfig, stats_for_table
from txntable.engine.read.data_files import check_legacy_calendar, parquet_file
from txntable.engine.storage.base import LocalStorage, Storage
from txntable.engine.storage.factory import open_storage, open_uri_input
from txntable.engine.storage.paths import decode_path, encode_path, has_scheme, partition_dir
from txntable.engine.write.parquet_options import ParquetWriteOptions
from txntable.engine.write.parquet_options import resolve as resolve_parquet
from txntable.engine.write.writer import data_file_name
from txntable.maintenance.errors import BinExecutionError
from txntable.maintenance.planner import ZORDER_TAG
from txntable.maintenance.zorder import zorder_sort


@dataclass(frozen=True)
class BinTask:
    """Everything a worker needs to rewrite one bin (picklable, JSON-shaped)."""

    table_uri: str
    bin_id: str
    inputs: tuple[str, ...]  # raw log paths, verbatim
    input_bytes: int
    partition_columns: tuple[str, ...]
    partition_values: Mapping[str, str | None]
    schema_string: str
    configuration: Mapping[str, str]
    target_file_size: int
    zorder_by: tuple[str, ...] = ()
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    #: each input's deletion vector (``deletionVector`` JSON) or None, aligned with ``inputs``
    #: (empty: none has one); the rows it deletes are left out of the rewrite
    deletion_vectors: tuple[Mapping[str, Any] | None, ...] = ()
    #: row tracking: each input's ``baseRowId`` and ``defaultRowCommitVersion``, aligned with
    #: ``inputs``; with ``delta.enableRowTracking=true`` every rewritten row carries its stable row
    #: id and commit version in the materialized columns the configuration names
    base_row_ids: tuple[int | None, ...] = ()
    row_commit_versions: tuple[int | None, ...] = ()
    #: the most input bytes (Parquet bytes in storage) one task may load (None: no limit), the
    #: executor's ``max_task_input_bytes``: a bin over it fails before reading anything
    max_input_bytes: int | None = None
    #: Parquet writer settings (``ParquetWriteOptions.to_json``) resolved once by the run; empty:
    #: the table property ``delta.parquet.compression.codec`` or the defaults
    parquet: Mapping[str, Any] = field(default_factory=dict)
    #: write the partition columns into the files too, after the data columns
    #: (``iceberg_compat.materializes_partitions``: materializePartitionColumns, icebergCompat)
    materialize_partitions: bool = False
    #: give the materialized row tracking columns Iceberg's row lineage field ids in the files
    #: written (``iceberg_compat.row_tracking_field_ids``: icebergCompatV3 is active)
    row_lineage_ids: bool = False


@dataclass(frozen=True)
class BinResult:
    """What a worker did: ``adds`` (AddFile JSON) on success, else ``error``; ``written`` lists
    the relative paths of every file it created (for clean-up when the bin is not committed)."""

    bin_id: str
    adds: tuple[dict[str, Any], ...] = ()
    written: tuple[str, ...] = ()
    rows: int = 0
    seconds: float = 0.0
    error: str | None = None
    #: the worker process's peak resident memory (bytes) once the bin was done: the memory a
    #: task slot needed (the controller sizes later runs by it, ``launch.sizing``); 0 unknown
    peak_memory: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BinResult:
        return cls(
            bin_id=obj["bin_id"],
            adds=tuple(obj.get("adds") or ()),
            written=tuple(obj.get("written") or ()),
            rows=int(obj.get("rows") or 0),
            seconds=float(obj.get("seconds") or 0.0),
            error=obj.get("error"),
            peak_memory=int(obj.get("peak_memory") or 0),
        )


def data_schema(
    schema_string: str,
    partition_columns: Sequence[str],
    configuration: Mapping[str, str] | None = None,
) -> pa.Schema:
    """The Arrow schema of the table's data files (partition columns are not stored): physical
    names and Parquet field ids under column mapping, every column in its current type."""
    return PhysicalLayout.build(schema_string, partition_columns, configuration or {}).schema


def conform(
    table: pa.Table,
    schema: pa.Schema,
    *,
    by_id: bool = False,
    variants: frozenset[tuple[str, ...]] = frozenset(),
) -> pa.Table:
    """``table`` with exactly ``schema``'s columns, matched by name (by Parquet field id when
    ``by_id`` and the file has ids), nested fields too: missing ones null, narrower (older)
    types widened by lossless casts; shredded data in ``variants`` paths is refused."""
    return conform_table(table, schema, by_id=by_id, variants=variants)


def _stats_config(layout: PhysicalLayout, configuration: Mapping[str, str]) -> StatsConfig:
    """The table's statistics settings, explicit column names translated to physical ones."""
    config = StatsConfig.from_configuration(configuration)
    if config.stats_columns is None or layout.mode == "none":
        return config
    names = []
    for name in config.stats_columns:
        path = layout.physical_path(name.split("."))
        if path is not None:
            names.append(".".join(path))
    return StatsConfig(num_indexed_cols=config.num_indexed_cols, stats_columns=tuple(names))


def check_task_input(what: str, num_bytes: int, limit: int | None) -> None:
    """Refuse to load ``num_bytes`` of input in one task when that is over ``limit``."""
    if limit is not None and num_bytes > limit:
        raise BinExecutionError(
            f"{what} is {num_bytes} bytes, over the per-task limit max_task_input_bytes={limit}"
        )


def _read_parquet(pf: pq.ParquetFile, raw_path: str, max_bytes: int | None) -> pa.Table:
    if max_bytes is not None:  # the guard reads the footer only, before any data
        meta = pf.metadata
        size = sum(
            group.column(j).total_compressed_size
            for group in (meta.row_group(i) for i in range(meta.num_row_groups))
            for j in range(group.num_columns)
        )
        check_task_input(f"input {raw_path}", size, max_bytes)
    data = pf.read()
    check_legacy_calendar(pf, data, raw_path)
    return data


def _read_input(
    storage: Storage, raw_path: str, options: Mapping[str, Any], max_bytes: int | None = None
) -> pa.Table:
    decoded = decode_path(raw_path)
    # an absolute URI (a file outside the table root) opens through the same storage classes
    # and option names as the table: fsspec knows neither delta-rs names nor our S3 client
    source = (
        open_uri_input(decoded, options) if has_scheme(raw_path) else storage.open_input(decoded)
    )
    if isinstance(source, str):
        return _read_parquet(parquet_file(source), raw_path, max_bytes)
    with source:
        return _read_parquet(parquet_file(source), raw_path, max_bytes)


def write_options(task: BinTask) -> ParquetWriteOptions:
    """The Parquet settings a task writes with: the run's, else the table's or the defaults."""
    if task.parquet:
        return ParquetWriteOptions.from_json(task.parquet)
    return resolve_parquet(task.configuration)


def _write_output(
    storage: Storage,
    relative: str,
    data: pa.Table,
    written: list[str],
    options: ParquetWriteOptions,
) -> tuple[int, pq.FileMetaData]:
    """Write one Parquet file with ``options`` (straight to disk when local); its size in
    bytes and its footer."""
    written.append(relative)
    if isinstance(storage, LocalStorage):
        path = os.path.join(storage.root_path, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        footer = options.write(data, path)
        return os.path.getsize(path), footer
    sink = pa.BufferOutputStream()
    footer = options.write(data, sink)
    payload = sink.getvalue()
    storage.write(relative, payload.to_pybytes())
    return int(payload.size), footer


def output_file_count(input_bytes: int, target_file_size: int, num_inputs: int) -> int:
    """Files a bin writes: by bytes (input bytes over the target), never more than it reads.

    A compaction must never multiply the file count: a Z-order bin holds whole partitions, whose
    files may already exceed a small target, and splitting them by the target would turn 8 files
    into 112. Rows are spread evenly over the files, so each gets about the same bytes."""
    by_bytes = math.ceil(input_bytes / target_file_size) if target_file_size > 0 else 1
    return max(1, min(by_bytes, num_inputs))


def _row_tracking_of(task: BinTask, index: int) -> tuple[int | None, int | None]:
    """(baseRowId, defaultRowCommitVersion) of input ``index`` (None where not given)."""
    base = task.base_row_ids[index] if task.base_row_ids else None
    version = task.row_commit_versions[index] if task.row_commit_versions else None
    return base, version


class BinIO:
    """One bin's reading and writing steps, apart so that they can run in different tasks:
    ``rewrite_bin`` runs them all in one task, the distributed Z-order (``zorder_spark``) reads
    each input in its own task and writes each key range in another."""

    def __init__(self, task: BinTask) -> None:
        self.task = task
        self.storage = open_storage(task.table_uri, task.storage_options)
        self.parquet = write_options(task)
        self.layout = PhysicalLayout.build(
            task.schema_string, task.partition_columns, task.configuration
        )
        self.tracked = preserved_columns(task.configuration)  # hidden columns, after the schema's
        #: the conformed rows' schema: the data files' columns, then row tracking's hidden ones
        self.schema = (
            self.tracked.extend(self.layout.schema) if self.tracked else self.layout.schema
        )
        #: physical names of the columns whose Z-order key orders the rows (empty: none)
        self.order_by = tuple(self.layout.physical_column(c) for c in task.zorder_by)
        self.tags: dict[str, str | None] | None = (
            {ZORDER_TAG: json.dumps(list(task.zorder_by), separators=(",", ":"))}
            if task.zorder_by
            else None
        )
        self._stats = _stats_config(self.layout, task.configuration)
        # the log and the directories name partition columns physically under column mapping
        keys = self.layout.partition_keys
        self.partition_values = {keys.get(c, c): v for c, v in task.partition_values.items()}
        self.directory = partition_dir(
            [keys.get(c, c) for c in task.partition_columns], self.partition_values
        )

    def read_conformed(self, index: int, max_bytes: int | None = None) -> pa.Table:
        """Input ``index``'s live rows in the table's physical layout: row tracking's values
        filled in, rows its deletion vector deletes left out, columns conformed. ``max_bytes``
        refuses a file over that many bytes before reading its data."""
        task, path = self.task, self.task.inputs[index]
        data = _read_input(self.storage, path, task.storage_options, max_bytes)
        if self.tracked:  # before deletion vectors: a default row id is base + file position
            data = self.tracked.attach(data, *_row_tracking_of(task, index), where=path)
        dv = task.deletion_vectors[index] if task.deletion_vectors else None
        if dv is not None:
            deleted = deleted_rows(self.storage, dv, task.storage_options)
            data = data.filter(keep_mask(data.num_rows, deleted))
        return conform(
            data,
            self.schema,
            by_id=self.layout.mode == "id",
            variants=self.layout.variant_paths,
        )

    def relative_path(self, name: str) -> str:
        """Where a new data file named ``name`` goes: the bin's partition directory."""
        return f"{self.directory}/{name}" if self.task.partition_columns else name

    def write_chunk(
        self, chunk: pa.Table, written: list[str], name: str | None = None
    ) -> dict[str, Any]:
        """Write ``chunk`` (conformed rows) as one new data file, named ``name`` or a fresh
        name; its ``add`` action as JSON. ``written`` gets the path before the write starts."""
        relative = self.relative_path(name or data_file_name(self.parquet.file_tag))
        tracked = self.tracked
        data = chunk.drop_columns(list(tracked.names)) if tracked else chunk
        content = self._file_columns(chunk)  # data's columns first, then any others
        size, footer = _write_output(self.storage, relative, content, written, self.parquet)
        stats = stats_for_table(
            data, config=self._stats, opaque=self.layout.unbounded_paths, footer=footer
        )
        add = AddFile(
            path=encode_path(relative),
            partition_values=dict(self.partition_values),
            size=size,
            modification_time=int(time.time() * 1000),
            data_change=False,
            stats=stats,  # partition columns get none, materialized or not
            tags=self.tags,
        )
        return add.to_json()

    def _file_columns(self, chunk: pa.Table) -> pa.Table:
        """What a new file holds: ``chunk``'s data columns, the partition columns when the table
        materializes them (after the data columns, as Iceberg compatibility asks), then row
        tracking's hidden columns."""
        chunk = self._with_lineage_ids(chunk)
        if not self.task.materialize_partitions or not self.layout.partition_schema.names:
            return chunk
        values = self.layout.partition_columns(self.partition_values, chunk.num_rows)
        count = len(self.layout.schema)
        columns = [*chunk.columns[:count], *values.columns, *chunk.columns[count:]]
        own = list(chunk.schema)
        fields = [*own[:count], *values.schema, *own[count:]]
        return pa.Table.from_arrays(columns, schema=pa.schema(fields))

    def _with_lineage_ids(self, chunk: pa.Table) -> pa.Table:
        """``chunk`` with Iceberg's row lineage field ids on the materialized row tracking
        columns when icebergCompatV3 asks for them (only in the file written: the rows are
        conformed by name before, and an id there would hide the columns from that)."""
        if not (self.task.row_lineage_ids and self.tracked):
            return chunk
        ids = dict(
            zip(self.tracked.names, (ROW_ID_FIELD_ID, ROW_COMMIT_VERSION_FIELD_ID), strict=True)
        )
        fields = [
            f.with_metadata({FIELD_ID_KEY: str(ids[f.name]).encode()}) if f.name in ids else f
            for f in chunk.schema
        ]
        return chunk.cast(pa.schema(fields))


def rewrite_bin(task: BinTask) -> BinResult:
    """Rewrite one bin in this task; never raises (errors come back in the result)."""
    start = time.monotonic()
    written: list[str] = []
    try:
        check_task_input(f"bin {task.bin_id}'s input", task.input_bytes, task.max_input_bytes)
        io = BinIO(task)
        parts = [io.read_conformed(index) for index in range(len(task.inputs))]
        data = pa.concat_tables(parts) if parts else io.schema.empty_table()
        if io.order_by:
            data = zorder_sort(data, io.order_by)
        n_out = output_file_count(task.input_bytes, task.target_file_size, len(task.inputs))
        rows_per_file = max(1, math.ceil(data.num_rows / n_out))
        adds = [  # no rows: removes only
            io.write_chunk(data.slice(offset, rows_per_file), written)
            for offset in range(0, data.num_rows, rows_per_file)
        ]
        return BinResult(
            task.bin_id,
            adds=tuple(adds),
            written=tuple(written),
            rows=data.num_rows,
            seconds=time.monotonic() - start,
            peak_memory=peak_memory(),
        )
    except Exception as exc:  # a worker reports, the orchestrator decides
        return BinResult(
            task.bin_id,
            written=tuple(written),
            seconds=time.monotonic() - start,
            error=error_line(exc),
            peak_memory=peak_memory(),
        )


def peak_memory() -> int:
    """This process's peak resident memory in bytes (``ru_maxrss``; 0 where unknown). In a
    Spark Python worker it is the most any task of that worker needed, the worker included."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Linux/macOS
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) * (1 if sys.platform == "darwin" else 1024)


def error_line(exc: BaseException) -> str:
    """``Type: message`` of an error, as a bin result reports it."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


class ArrowExecutor:
    """Runs bins in a thread pool of this process (pyarrow releases the GIL while decoding and
    encoding), for small runs, tests and machines without a JVM."""

    name = "arrow"

    def __init__(self, workers: int = 2, max_task_input_bytes: int | None = None) -> None:
        self.workers = max(1, workers)
        #: a bin with more input bytes than this fails instead of loading (None: no limit)
        self.max_task_input_bytes = max_task_input_bytes

    def run(self, tasks: Sequence[BinTask]) -> list[BinResult]:
        if not tasks:
            return []
        if self.max_task_input_bytes is not None:
            tasks = [replace(t, max_input_bytes=self.max_task_input_bytes) for t in tasks]
        with ThreadPoolExecutor(max_workers=min(self.workers, len(tasks))) as pool:
            return list(pool.map(rewrite_bin, tasks))

    def close(self) -> None:
        """Nothing to release."""
