"""Fast generator of large Delta logs for the read-path benchmarks.

Writing ten thousand commits through ``write_deltalake`` would take many minutes, and loading a
snapshot reads only the log, so this module writes the commit files directly, shaped like the ones
delta-rs writes (``commitInfo`` first, then ``protocol``/``metaData`` in commit 0, ``add`` with a
realistic ``stats`` JSON string and ``partitionValues``, ``remove`` for deletes) and lets
``deltalake`` itself write the checkpoint, so the Parquet checkpoint is genuinely delta-rs's. No
data files are written: the paths in the log point at Parquet files that do not exist.

Generated tables are cached under ``bench/out/`` keyed by their parameters; a table is complete
when its ``.complete`` marker exists (it is built in a temporary directory and renamed).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent / "out"
_GENERATOR_REVISION = 1  # bump when the log shape changes, so cached tables are rebuilt

_SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "double", "nullable": True, "metadata": {}},
        {"name": "name", "type": "string", "nullable": True, "metadata": {}},
        {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
        {"name": "date", "type": "date", "nullable": True, "metadata": {}},
    ],
}
_CLIENT = "delta-rs.py-1.6.6"


@dataclass(frozen=True)
class TableSpec:
    """What to generate. ``commits`` versions (0..commits-1), then an optional delta-rs checkpoint
    at the last of them, then ``tail`` more append commits; ``active_files`` live at the end."""

    commits: int = 10_000
    active_files: int = 100_000
    files_per_tail_commit: int = 10
    remove_every: int = 20  # every Nth commit is a DELETE that removes ``removes_per`` files
    removes_per: int = 10
    partitions: int = 100
    checkpoint: bool = True
    tail: int = 10
    seed: int = 7

    @property
    def key(self) -> str:
        parts = [f"r{_GENERATOR_REVISION}"] + [f"{k}{v}" for k, v in asdict(self).items()]
        return "-".join(str(p) for p in parts).replace("_", "")

    @property
    def last_version(self) -> int:
        return self.commits - 1 + self.tail

    @property
    def checkpoint_version(self) -> int | None:
        return self.commits - 1 if self.checkpoint else None


def table_path(spec: TableSpec, out_dir: Path | None = None) -> Path:
    """The cached table for ``spec``, generated first when missing."""
    root = (out_dir or OUT_DIR) / spec.key
    if (root / ".complete").exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    building = root.parent / f".{spec.key}.{uuid.uuid4().hex}.tmp"
    try:
        generate(spec, building)
        (building / ".complete").write_text(json.dumps(asdict(spec)) + "\n")
        if root.exists():
            shutil.rmtree(root)
        building.rename(root)
    finally:
        if building.exists():
            shutil.rmtree(building)
    return root


class _Writer:
    """Produces commit lines the way delta-rs lays them out."""

    def __init__(self, spec: TableSpec, root: Path) -> None:
        self.spec = spec
        self.log = root / "_delta_log"
        self.log.mkdir(parents=True)
        self.rng = random.Random(spec.seed)
        # keep every timestamp within the default 1-week tombstone retention, so the
        # checkpoint delta-rs writes still carries the removes
        self.t0 = int(time.time() * 1000) - (spec.commits + spec.tail) * 1000 - 60_000
        start = date(2024, 1, 1)
        self.dates = [(start + timedelta(days=i)).isoformat() for i in range(spec.partitions)]
        self.live: list[dict[str, object]] = []
        self.next_id = 0

    def add(self, ts: int) -> str:
        rng = self.rng
        day = rng.choice(self.dates)
        rows = rng.randint(1_000, 200_000)
        lo = self.next_id
        self.next_id += rows
        name_lo = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=8))
        name_hi = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=8))
        nulls = rng.randint(0, rows // 100)
        stats = {
            "numRecords": rows,
            "minValues": {
                "id": lo,
                "value": round(rng.uniform(-1000, 0), 6),
                "name": min(name_lo, name_hi),
                "ts": f"{day}T00:00:{rng.randint(0, 59):02d}.000Z",
            },
            "maxValues": {
                "id": lo + rows - 1,
                "value": round(rng.uniform(0, 1000), 6),
                "name": max(name_lo, name_hi),
                "ts": f"{day}T23:59:{rng.randint(0, 59):02d}.000Z",
            },
            "nullCount": {"id": 0, "value": nulls, "name": 0, "ts": 0},
        }
        file_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        add = {
            "path": f"date={day}/part-00000-{file_id}-c000.snappy.parquet",
            "partitionValues": {"date": day},
            "size": rows * 24 + rng.randint(500, 5_000),
            "modificationTime": ts,
            "dataChange": True,
            "stats": json.dumps(stats, separators=(",", ":")),
            "tags": None,
            "baseRowId": None,
            "defaultRowCommitVersion": None,
            "clusteringProvider": None,
        }
        self.live.append(add)
        return json.dumps({"add": add}, separators=(",", ":"))

    def remove(self, ts: int) -> str:
        index = self.rng.randrange(len(self.live))
        self.live[index], self.live[-1] = self.live[-1], self.live[index]
        add = self.live.pop()
        remove = {
            "path": add["path"],
            "dataChange": True,
            "deletionTimestamp": ts,
            "extendedFileMetadata": True,
            "partitionValues": add["partitionValues"],
            "size": add["size"],
        }
        return json.dumps({"remove": remove}, separators=(",", ":"))

    def commit_info(self, ts: int, version: int, operation: str, added: int, removed: int) -> str:
        params: dict[str, object]
        if operation == "DELETE":
            params = {"predicate": "id < 0"}
            metrics = {
                "num_added_files": added,
                "num_removed_files": removed,
                "num_deleted_rows": removed * 1000,
                "num_copied_rows": 0,
                "execution_time_ms": 5,
                "scan_time_ms": 3,
                "rewrite_time_ms": 0,
            }
        else:
            mode = "ErrorIfExists" if version == 0 else "Append"
            params = {"mode": mode, "partitionBy": '["date"]'}
            metrics = {
                "num_added_files": added,
                "num_removed_files": removed,
                "num_partitions": 0,
                "num_added_rows": added * 1000,
                "execution_time_ms": 7,
                "num_retries": 0,
            }
        info: dict[str, object] = {
            "timestamp": ts,
            "operation": operation,
            "operationParameters": params,
        }
        if version > 0:
            info["readVersion"] = version - 1
        info.update(
            {
                "engineInfo": "delta-rs:py-1.6.6",
                "operationMetrics": metrics,
                "clientVersion": _CLIENT,
            }
        )
        return json.dumps({"commitInfo": info}, separators=(",", ":"))

    def write_commit(self, version: int, adds: int, removes: int) -> None:
        ts = self.t0 + version * 1000
        body: list[str] = []
        if version == 0:
            body.append('{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}')
            metadata = {
                "id": str(uuid.UUID(int=self.rng.getrandbits(128), version=4)),
                "name": None,
                "description": None,
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(_SCHEMA, separators=(",", ":")),
                "partitionColumns": ["date"],
                "createdTime": ts,
                "configuration": {},
            }
            body.append(json.dumps({"metaData": metadata}, separators=(",", ":")))
        removes = min(removes, len(self.live))
        body.extend(self.remove(ts) for _ in range(removes))
        body.extend(self.add(ts) for _ in range(adds))
        operation = "DELETE" if removes else "WRITE"
        lines = [self.commit_info(ts, version, operation, adds, removes), *body]
        path = self.log / f"{version:020d}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, ns=(ts * 1_000_000, ts * 1_000_000))


def generate(spec: TableSpec, root: Path) -> None:
    """Write the table described by ``spec`` into the empty (or absent) directory ``root``."""
    writer = _Writer(spec, root)
    delete_versions = [v for v in range(1, spec.commits) if v % spec.remove_every == 0]
    total_removes = len(delete_versions) * spec.removes_per
    main_adds = spec.active_files - spec.tail * spec.files_per_tail_commit + total_removes
    if main_adds < spec.commits:
        raise ValueError(f"{spec} leaves fewer than one add per commit")
    deletes = set(delete_versions)
    for v in range(spec.commits):
        adds = (v + 1) * main_adds // spec.commits - v * main_adds // spec.commits
        writer.write_commit(v, adds, spec.removes_per if v in deletes else 0)
    if spec.checkpoint:
        from deltalake import DeltaTable

        DeltaTable(str(root)).create_checkpoint()  # delta-rs writes it, as its cadence would
    for v in range(spec.commits, spec.commits + spec.tail):
        writer.write_commit(v, spec.files_per_tail_commit, 0)
    if len(writer.live) != spec.active_files:
        raise AssertionError(f"generated {len(writer.live)} live files, wanted {spec.active_files}")
