"""Small builders for commit-path tests: tables with fake data files, actions, fast options.

No Parquet is written: AddFile actions point at paths that do not exist, which is all the log and
the conflict checker look at.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from txntable.engine.commit.transaction import CommitOptions
from txntable.engine.model.actions import (
    AddFile,
    CommitInfo,
    Metadata,
    Protocol,
    RemoveFile,
    serialize_commit,
)
from txntable.engine.storage.base import LocalStorage, Storage
from txntable.engine.storage.factory import open_storage
from txntable.engine.table import Table

SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "p", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def fast(**kwargs: Any) -> CommitOptions:
    """Options without backoff sleeps (tests must be quick)."""
    return CommitOptions(backoff_initial_s=0.0, sleep=lambda _s: None, **kwargs)


def metadata(
    partitioned: bool = True, config: dict[str, str] | None = None, table_id: str = "tbl-1"
) -> Metadata:
    return Metadata(
        id=table_id,
        schema_string=SCHEMA,
        partition_columns=["p"] if partitioned else [],
        configuration=dict(config or {}),
        created_time=1,
    )


def storage_for(kind: str, tmp_path: Path | None = None) -> Storage:
    if kind == "memory":
        return open_storage(f"memory://txn-tests/{uuid.uuid4().hex}")
    assert tmp_path is not None
    root = tmp_path / f"t-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    return LocalStorage(str(root))


def add(path: str, part: str | None = "1", *, partitioned: bool = True, dc: bool = True) -> AddFile:
    return AddFile(
        path=path,
        partition_values={"p": part} if partitioned else {},
        size=100,
        modification_time=1,
        data_change=dc,
    )


def remove(a: AddFile, dc: bool = True) -> RemoveFile:
    return a.to_remove(deletion_timestamp=2, data_change=dc)


def new_table(
    kind: str = "memory",
    tmp_path: Path | None = None,
    *,
    partitioned: bool = True,
    level: str | None = None,
    config: dict[str, str] | None = None,
    protocol: Protocol | None = None,
    files: bool = True,
) -> Table:
    """A table at version 0: p=1 holds a, b and p=2 holds c, d (or a-d unpartitioned)."""
    cfg = dict(config or {})
    if level is not None:
        cfg["delta.isolationLevel"] = level
    table = Table(storage_for(kind, tmp_path))
    txn = table.transaction(fast())
    txn.set_metadata(metadata(partitioned, cfg))
    if protocol is not None:
        txn.set_protocol(protocol)
    if files:
        txn.add(*initial_files(partitioned))
    txn.commit("CREATE TABLE AS SELECT")
    return table


def initial_files(partitioned: bool = True) -> list[AddFile]:
    if partitioned:
        return [
            add("p=1/a", "1"),
            add("p=1/b", "1"),
            add("p=2/c", "2"),
            add("p=2/d", "2"),
        ]
    return [add(name, partitioned=False) for name in ("a", "b", "c", "d")]


def raw_commit(table: Table, version: int, actions: list[Any], info: dict[str, Any]) -> None:
    """Write a commit the way another engine might (e.g. delta-rs without isBlindAppend)."""
    data = serialize_commit([CommitInfo(info), *actions])
    table.storage.write_if_absent(f"_delta_log/{version:020d}.json", data)


def log_versions(table: Table) -> list[int]:
    names = [f.name for f in table.storage.list_log()]
    return sorted(int(n.split(".")[0]) for n in names if n.endswith(".json") and n[0].isdigit())


def read_commit(table: Table, version: int) -> list[dict[str, Any]]:
    text = table.storage.read_log(f"{version:020d}.json").decode()
    return [json.loads(line) for line in text.splitlines() if line]


def removes_of(files: Any, dc: bool = True) -> list[RemoveFile]:
    """Removes for the rows of a scan result (``ADD_SCHEMA`` Arrow table)."""
    out = []
    for row in files.to_pylist():
        out.append(
            RemoveFile(
                path=row["path"],
                deletion_timestamp=2,
                data_change=dc,
                extended_file_metadata=True,
                partition_values=dict(row["partitionValues"] or []),
                size=row["size"],
            )
        )
    return out
