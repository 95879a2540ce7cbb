"""Test helpers: write Delta logs by hand, generate tables with ``deltalake``, and compare.

Two kinds of tables are needed. Hand-written logs (``write_log``) let a test put exactly the
actions it is about into each commit, without any data files; ``deltalake`` (delta-rs, an
independent engine) writes real tables and serves as the oracle that ``observed`` / ``expected``
compare our snapshots with. ``deltalake`` is imported lazily so unit tests never load it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.base import LocalStorage

SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "part", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)

#: Partition values that need escaping somewhere (directory, URI) plus null and empty string.
SPECIAL_VALUES: list[str | None] = [
    "a b",
    "x=y",
    "50%",
    "a/b",
    "c:d",
    "#h",
    "1+1",
    "q?",
    "é",
    "日本",
    "",
    None,
    "plain",
]


# -- hand-written logs ----------------------------------------------------------------------
def protocol(reader: int = 1, writer: int = 2, **extra: Any) -> dict[str, Any]:
    return {"protocol": {"minReaderVersion": reader, "minWriterVersion": writer, **extra}}


def metadata(
    partition_columns: Iterable[str] = (),
    configuration: Mapping[str, str] | None = None,
    table_id: str = "00000000-0000-0000-0000-000000000001",
    schema_string: str = SCHEMA_STRING,
) -> dict[str, Any]:
    return {
        "metaData": {
            "id": table_id,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string,
            "partitionColumns": list(partition_columns),
            "configuration": dict(configuration or {}),
            "createdTime": 1700000000000,
        }
    }


def add(
    path: str,
    size: int = 100,
    partition_values: Mapping[str, str | None] | None = None,
    dv: Mapping[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "path": path,
        "partitionValues": dict(partition_values or {}),
        "size": size,
        "modificationTime": 1700000000000,
        "dataChange": True,
        **extra,
    }
    if dv is not None:
        body["deletionVector"] = dict(dv)
    return {"add": body}


def remove(path: str, dv: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "path": path,
        "deletionTimestamp": 1700000000001,
        "dataChange": True,
        **extra,
    }
    if dv is not None:
        body["deletionVector"] = dict(dv)
    return {"remove": body}


def commit_info(operation: str = "WRITE", **extra: Any) -> dict[str, Any]:
    return {"commitInfo": {"timestamp": 1700000000000, "operation": operation, **extra}}


def dv(name: str, cardinality: int = 1, offset: int | None = 1) -> dict[str, Any]:
    out: dict[str, Any] = {
        "storageType": "u",
        "pathOrInlineDv": name.ljust(20, "0")[:20],
        "sizeInBytes": 40,
        "cardinality": cardinality,
    }
    if offset is not None:
        out["offset"] = offset
    return out


def json_line(action: Mapping[str, Any]) -> str:
    """One action as a compact JSON line (without the newline)."""
    return json.dumps(action, separators=(",", ":"), ensure_ascii=False)


def write_commit(
    table: Path, version: int, actions: Iterable[Mapping[str, Any]], newline: bool = True
) -> Path:
    """Write ``{version:020d}.json`` with one JSON action per line."""
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    lines = [json_line(a) for a in actions]
    text = "\n".join(lines) + ("\n" if newline else "")
    path = log / f"{version:020d}.json"
    path.write_text(text, encoding="utf-8")
    return path


def write_log(table: Path, commits: Mapping[int, Iterable[Mapping[str, Any]]]) -> Path:
    for version, actions in commits.items():
        write_commit(table, version, actions)
    return table


def simple_log(table: Path, num_commits: int = 3) -> Path:
    """Version 0 creates an unpartitioned table; every later version adds ``f{v}.parquet``."""
    write_commit(table, 0, [commit_info("CREATE TABLE"), protocol(), metadata()])
    for v in range(1, num_commits):
        write_commit(table, v, [commit_info(), add(f"f{v}.parquet", size=v)])
    return table


def split_checkpoint(log: Path, version: int, num_parts: int = 2) -> list[Path]:
    """Rewrite the classic checkpoint at ``version`` as a multi-part one (and delete it)."""
    classic = log / f"{version:020d}.checkpoint.parquet"
    table = pq.read_table(classic)
    per_part = -(-table.num_rows // num_parts)
    out = []
    for i in range(num_parts):
        part = log / f"{version:020d}.checkpoint.{i + 1:010d}.{num_parts:010d}.parquet"
        pq.write_table(table.slice(i * per_part, per_part), part)
        out.append(part)
    classic.unlink()
    return out


def copy_table(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    for root, _dirs, files in os.walk(dest):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    return dest


# -- snapshots -------------------------------------------------------------------------------
def fingerprint(s: Snapshot) -> dict[str, Any]:
    """Everything a snapshot reconstructs, in a comparable form."""
    files = s.files()
    dvs = files.column("deletionVector").to_pylist()
    rows = sorted(
        (path, size, json.dumps(pv, sort_keys=True), json.dumps(dv, sort_keys=True))
        for path, size, pv, dv in zip(
            files.column("path").to_pylist(),
            files.column("size").to_pylist(),
            [dict(v or []) for v in files.column("partitionValues").to_pylist()],
            dvs,
            strict=True,
        )
    )
    tombstones = sorted(s.tombstones().column("path").to_pylist())
    return {
        "version": s.version,
        "files": rows,
        "tombstones": tombstones,
        "protocol": s.protocol.to_json(),
        "metadata": s.metadata.to_json(),
        "txns": {k: v.to_json() for k, v in s.state.txns.items()},
        "domains": {k: v.to_json() for k, v in s.domains.items()},
    }


def load(path: Path, version: int | None = None) -> Snapshot:
    return Snapshot.load(LocalStorage(str(path)), version)


def log(path: Path) -> Path:
    return path / "_delta_log"


# -- comparison with deltalake ---------------------------------------------------------------
def observed(snapshot: Snapshot) -> dict[str, Any]:
    """What our engine reports, in a shape comparable with ``expected``."""
    typed = snapshot.partition_values().to_pylist()
    sizes = snapshot.files().column("size").to_pylist()
    files = {
        uri: (size, typed[i] if snapshot.partition_columns else {})
        for i, (uri, size) in enumerate(zip(snapshot.file_uris(), sizes, strict=True))
    }
    assert len(files) == snapshot.num_files, "two live files resolve to one location"
    p, m = snapshot.protocol, snapshot.metadata
    return {
        "version": snapshot.version,
        "files": files,
        "protocol": (
            p.min_reader_version,
            p.min_writer_version,
            sorted(p.reader_features) if p.reader_features is not None else None,
            sorted(p.writer_features) if p.writer_features is not None else None,
        ),
        "metadata": {
            "id": m.id,
            "partitionColumns": list(m.partition_columns),
            "configuration": dict(m.configuration),
            "schema": json.loads(m.schema_string),
        },
    }


def expected(dt: Any) -> dict[str, Any]:
    """The same facts as ``observed``, as ``deltalake.DeltaTable`` reports them."""
    adds = pa.table(dt.get_add_actions(flatten=True))
    part_cols = [c for c in adds.column_names if c.startswith("partition.")]
    parts = adds.select(part_cols).to_pylist() if part_cols else [{}] * adds.num_rows
    files = {
        uri: (size, {k[len("partition.") :]: v for k, v in parts[i].items()})
        for i, (uri, size) in enumerate(
            zip(dt.file_uris(), adds.column("size_bytes").to_pylist(), strict=True)
        )
    }
    p, m = dt.protocol(), dt.metadata()
    return {
        "version": dt.version(),
        "files": files,
        "protocol": (
            p.min_reader_version,
            p.min_writer_version,
            sorted(p.reader_features) if p.reader_features is not None else None,
            sorted(p.writer_features) if p.writer_features is not None else None,
        ),
        "metadata": {
            "id": m.id,
            "partitionColumns": list(m.partition_columns),
            "configuration": dict(m.configuration),
            "schema": json.loads(dt.schema().to_json()),
        },
    }


def write_rows(
    path: Path,
    data: pa.Table,
    mode: str = "append",
    partition_by: list[str] | None = None,
    configuration: Mapping[str, str] | None = None,
) -> None:
    from deltalake import write_deltalake

    write_deltalake(
        str(path),
        data,
        mode=mode,  # type: ignore[arg-type]
        partition_by=partition_by,
        configuration=dict(configuration) if configuration else None,
    )
