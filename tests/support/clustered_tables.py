"""Liquid-clustered tables made as Delta makes them (ALTER TABLE ... CLUSTER BY), then appended."""

from __future__ import annotations

import datetime as dt
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa

from txntable.engine.table import Table
from txntable.maintenance.clustering import CLUSTERING_DOMAIN

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("x", pa.int64()),
        ("d", pa.date32()),
        ("s", pa.string()),
        ("st", pa.struct([("a", pa.int32())])),
    ]
)


CLUSTERED_PROTOCOL = {
    "minReaderVersion": 1,
    "minWriterVersion": 7,
    "writerFeatures": ["appendOnly", "invariants", "domainMetadata", "clustering"],
}


def random_rows(rng: random.Random, start: int, n: int) -> pa.Table:
    day0 = dt.date(2020, 1, 1)
    rows: list[dict[str, Any]] = [
        {
            "id": k,
            "x": rng.randrange(1_000_000),
            "d": day0 + dt.timedelta(days=rng.randrange(1500)),
            "s": None if k % 17 == 0 else f"s{rng.randrange(10_000):05d}",
            "st": {"a": k % 100},
        }
        for k in range(start, start + n)
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def clustered_table(
    path: Path, columns: list[Any], commits: int = 24, rows: int = 300, seed: int = 7
) -> Table:
    """A clustered table (protocol upgrade + domain in one commit) of ``commits`` appends."""
    table = Table.create(str(path), SCHEMA)
    info = {
        "timestamp": 1_700_000_000_000,
        "operation": "CLUSTER BY",
        "operationParameters": {"newClusteringColumns": json.dumps(columns)},
        "readVersion": 0,
        "isBlindAppend": False,
    }
    domain = {
        "domain": CLUSTERING_DOMAIN,
        "configuration": json.dumps({"clusteringColumns": columns}),
        "removed": False,
    }
    actions = [{"commitInfo": info}, {"protocol": CLUSTERED_PROTOCOL}, {"domainMetadata": domain}]
    with open(path / "_delta_log" / f"{1:020d}.json", "x", encoding="utf-8") as fh:
        fh.write("\n".join(json.dumps(a) for a in actions) + "\n")
    append_random(table, commits, rows, seed)
    return table


def append_random(table: Table, commits: int, rows: int, seed: int) -> None:
    rng = random.Random(seed)
    start = table.snapshot().num_files * rows + seed * 1_000_000
    for i in range(commits):
        table.append(random_rows(rng, start + i * rows, rows))


def log_lines(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]
