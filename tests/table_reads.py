"""What a table holds at a version, read two ways, for tests that compare before and after.

``state`` is our reader's reconstructed log state (every field of every live ``add``, the live
tombstones, protocol, metadata, transactions, domains) in a comparable form; ``rows`` reads every
live data file the way the engine's rewrite reads it (``PhysicalLayout``: physical names or field
ids, current types, INT96 at microseconds, deletion vectors applied) and returns the rows with
their logical column names and typed partition values, plus a digest. ``deltalake_reads`` reads
many (table, version) pairs with deltalake in one child process (``oracle_read`` does one).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from txntable.engine.checkpoint import retention
from txntable.engine.errors import EngineError
from txntable.engine.model.deletion_vectors import deleted_rows, keep_mask
from txntable.engine.model.physical import PhysicalLayout, conform_table
from txntable.engine.model.schema import parse_partition_column, parse_schema
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.base import LocalStorage
from txntable.engine.storage.paths import decode_path, has_scheme

#: add fields a checkpoint may legitimately change: it writes every add with dataChange=false
_CHANGING = ("dataChange",)


def load(path: Path | str, version: int | None = None) -> Snapshot:
    return Snapshot.load(LocalStorage(str(path)), version)


def _normal(value: Any) -> Any:
    """JSON strings (stats) parsed, maps as sorted dicts, so equal content compares equal."""
    if isinstance(value, str) and value.startswith("{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, list) and value and isinstance(value[0], tuple):
        return dict(sorted(value))
    return value


def state(snapshot: Snapshot, now_ms: int) -> dict[str, Any]:
    """Everything the log says at this version; tombstones only while retention keeps them
    (a checkpoint drops expired ones, as the protocol asks)."""
    files = sorted(
        json.dumps(
            {k: _normal(v) for k, v in row.items() if k not in _CHANGING},
            sort_keys=True,
            default=str,
        )
        for row in snapshot.files().to_pylist()
    )
    keep_ms = retention.duration_ms(
        snapshot.configuration,
        retention.DELETED_FILE_RETENTION,
        retention.DEFAULT_DELETED_FILE_RETENTION_MS,
    )
    assert keep_ms is not None
    tombstones = sorted(
        row["path"]
        for row in snapshot.tombstones().to_pylist()
        if (row["deletionTimestamp"] or 0) > now_ms - keep_ms
    )
    return {
        "version": snapshot.version,
        "files": files,
        "tombstones": tombstones,
        "protocol": snapshot.protocol.to_json(),
        "metadata": snapshot.metadata.to_json(),
        "txns": {k: v.to_json() for k, v in snapshot.state.txns.items()},
        "domains": {k: v.to_json() for k, v in snapshot.domains.items()},
    }


def parquet_file(source: Any) -> pq.ParquetFile:
    """A data file as this reader reads it: INT96 at microseconds, pyarrow's own reader (not
    the engine's), so the rows it returns are a check on the engine's rewrite."""
    return pq.ParquetFile(source, coerce_int96_timestamp_unit="us")


def _read_file(snapshot: Snapshot, raw: str) -> pa.Table:
    decoded = decode_path(raw)
    if has_scheme(raw) or decoded.startswith("/"):
        return parquet_file(snapshot.resolve(raw)).read()
    source = snapshot.storage.open_input(decoded)
    if isinstance(source, str):
        return parquet_file(source).read()
    with source:
        return parquet_file(source).read()


def rows(snapshot: Snapshot) -> list[dict[str, Any]]:
    """Every live row, logical column names, partition columns typed, sorted."""
    meta = snapshot.metadata
    layout = PhysicalLayout.build(meta.schema_string, meta.partition_columns, meta.configuration)
    names = [f.name for f in layout.fields]
    out: list[dict[str, Any]] = []
    for add in snapshot.files().to_pylist():
        data = _read_file(snapshot, add["path"])
        if add["deletionVector"] is not None:
            gone = deleted_rows(snapshot.storage, add["deletionVector"])
            data = data.filter(keep_mask(data.num_rows, gone))
        # shredded variants too: a reader may keep value and metadata only
        conformed = conform_table(data, layout.schema, by_id=layout.mode == "id")
        logical = conformed.rename_columns(names)
        values = dict(add["partitionValues"] or [])
        every = {f.name: f for f in parse_schema(meta.schema_string)}
        for field in (every[c] for c in meta.partition_columns if c in every):
            raw = values.get(layout.partition_keys.get(field.name, field.name))
            typed = parse_partition_column(
                pa.array([raw] * logical.num_rows, pa.string()), field.type
            )
            logical = logical.append_column(field.name, typed)
        out.extend(logical.to_pylist())
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True, default=repr))


def rows_digest(snapshot: Snapshot) -> tuple[int, str]:
    """(number of rows, digest of them); ``(-1, "<error>")`` when a data file or deletion
    vector of the version cannot be read (reference tables whose old files are gone)."""
    try:
        found = rows(snapshot)
    except (OSError, EngineError) as exc:
        return -1, f"{type(exc).__name__}"
    text = "\n".join(json.dumps(r, sort_keys=True, default=repr) for r in found)
    return len(found), hashlib.sha1(text.encode()).hexdigest()


_SCRIPT = """
import hashlib, json, sys
import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
for line in sys.stdin:
    path, version = json.loads(line)
    try:
        dt = deltalake.DeltaTable(path, version=version)
        qb = deltalake.QueryBuilder().register("t", dt)
        batches = pa.table(qb.execute("select * from t").read_all())
        rows = sorted(json.dumps(r, sort_keys=True, default=str) for r in batches.to_pylist())
        digest = hashlib.sha1("\\n".join(rows).encode()).hexdigest()
        out = {"rows": len(rows), "digest": digest, "version": dt.version()}
    except Exception as exc:
        out = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    print(json.dumps(out), flush=True)
"""


def deltalake_reads(pairs: Sequence[tuple[str, int | None]]) -> list[dict[str, Any]]:
    """deltalake's reading of each (table path, version) pair: ``{"rows", "digest",
    "version"}`` or ``{"error"}``; one child process for all of them."""
    return start_deltalake_reads(pairs)()


def start_deltalake_reads(
    pairs: Sequence[tuple[str, int | None]],
) -> Callable[[], list[dict[str, Any]]]:
    """``deltalake_reads`` started in the background: the child process reads while the caller
    does other work; calling the returned function waits for its answers."""
    if not pairs:
        return list
    proc = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    request = "".join(json.dumps([str(p), v]) + "\n" for p, v in pairs)

    def answers() -> list[dict[str, Any]]:
        try:  # the child imported deltalake meanwhile, the slow part
            out, err = proc.communicate(request, timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        lines = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
        if len(lines) != len(pairs):
            raise AssertionError(f"deltalake read {len(lines)} of {len(pairs)}: {err[-800:]}")
        return lines

    return answers
