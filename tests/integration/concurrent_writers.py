"""Writer processes for the concurrency tests (``python -m tests.integration.concurrent_writers``).

Roles: ``ours`` appends with this engine, ``deltalake`` appends with delta-rs, ``rewrite`` keeps
compacting files of one partition with ``dataChange=false`` through ``Transaction``. Each one
loads, says ``ready``, waits for the test's go file, runs for the given seconds and prints one
JSON line per event (committed ids, rewrite outcomes), so the test can check that every row it
was told about is in the table exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from txntable.engine.commit.transaction import CommitOptions, Transaction
from txntable.engine.errors import ConcurrentModificationException
from txntable.engine.storage.paths import decode_path
from txntable.engine.table import Table
from txntable.engine.write.writer import write_data_files

SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.string()), ("p", pa.string())])
PARTITIONS = ("a", "b", "c")
ROWS_PER_COMMIT = 5


def _emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _batch(worker: str, seq: int, base: int) -> pa.Table:
    ids = list(range(base + seq * ROWS_PER_COMMIT, base + (seq + 1) * ROWS_PER_COMMIT))
    part = PARTITIONS[seq % len(PARTITIONS)]
    return pa.table(
        {"id": ids, "writer": [worker] * len(ids), "p": [part] * len(ids)}, schema=SCHEMA
    )


def append_ours(path: str, worker: str, base: int, deadline: float) -> None:
    table = Table.open(path)
    seq = 0
    while time.time() < deadline:
        batch = _batch(worker, seq, base)
        result = table.append(batch)
        _emit(
            {
                "ids": batch.column("id").to_pylist(),
                "version": result.version,
                "retries": result.attempts - 1,
            }
        )
        seq += 1


def append_deltalake(path: str, worker: str, base: int, deadline: float) -> None:
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError

    seq = 0
    while time.time() < deadline:
        batch = _batch(worker, seq, base)
        try:
            write_deltalake(path, batch, mode="append")
        except CommitFailedError as exc:  # delta-rs gave up after its retries: rows not in
            _emit({"failed": str(exc)[:200]})
        else:
            _emit({"ids": batch.column("id").to_pylist()})
        seq += 1


def rewrite_once(table: Table, partition: str) -> dict[str, Any]:
    """Compact up to four files of ``partition`` into one, without changing data."""
    snapshot = table.snapshot()
    txn = Transaction(table, snapshot, CommitOptions(max_attempts=200))
    files = txn.scan(f"p = '{partition}'")
    adds = [a for a in snapshot.add_actions() if a.path in set(files.column("path").to_pylist())]
    adds = sorted(adds, key=lambda a: a.path)[:4]
    if len(adds) < 2:
        return {"rewrite": "skipped"}
    parts = [pq.read_table(snapshot.storage.open_input(decode_path(a.path))) for a in adds]
    data = pa.concat_tables(parts)
    data = data.append_column("p", pa.array([partition] * data.num_rows, pa.string()))
    new = write_data_files(table.storage, snapshot.metadata, data, data_change=False)
    now = int(time.time() * 1000)
    txn.add(*(a.to_remove(now, False) for a in adds), *new)
    try:
        result = txn.commit("OPTIMIZE", {"predicate": "[]"}, changes_data=False)
    except ConcurrentModificationException as exc:
        for add in new:  # our own unreferenced output
            table.storage.delete(decode_path(add.path))
        return {"rewrite": "conflict", "error": type(exc).__name__, "msg": str(exc)[:300]}
    return {
        "rewrite": "ok",
        "version": result.version,
        "files": len(adds),
        "retries": result.attempts - 1,
    }


def rewrite_loop(path: str, partition: str, deadline: float) -> None:
    table = Table.open(path)
    while time.time() < deadline:
        event = rewrite_once(table, partition)
        _emit(event)
        if event["rewrite"] == "skipped":
            time.sleep(0.02)


def _wait_for_go(go_file: str, duration: float) -> float:
    """Tell the test we are loaded, wait for its signal, and return our deadline."""
    _emit({"ready": True})
    while not os.path.exists(go_file):
        time.sleep(0.005)
    return time.time() + duration


def race_one_commit(path: str, options_json: str, go_file: str) -> None:
    """Prepare an append at the current version, then commit it the moment the test says go."""
    table = Table.open(path, json.loads(options_json))
    snapshot = table.snapshot()
    batch = _batch(f"race{os.getpid()}", 0, os.getpid() * 1000)
    txn = Transaction(table, snapshot)
    txn.add(*write_data_files(table.storage, snapshot.metadata, batch))
    _wait_for_go(go_file, 0.0)
    result = txn.commit("WRITE", {"mode": "Append"})
    _emit(
        {
            "read_version": snapshot.version,
            "version": result.version,
            "attempts": result.attempts,
            "ids": batch.column("id").to_pylist(),
        }
    )


def race_two_processes(
    uri: str, options: dict[str, str], go: Path, timeout: float
) -> list[dict[str, Any]]:
    """For a test: two processes ``race_one_commit`` on table ``uri``, let go at once (the file
    ``go`` created) once both are ready; their result lines. Each must exit 0."""
    command = [sys.executable, "-m", "tests.integration.concurrent_writers", "race", uri]
    procs = [
        subprocess.Popen(
            [*command, json.dumps(options), str(go)],
            cwd=Path(__file__).resolve().parents[2],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline() or "{}").get("ready"), proc.stderr
    go.touch()
    results: list[dict[str, Any]] = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def main(argv: list[str]) -> int:
    role, path = argv[0], argv[1]
    if role == "race":
        race_one_commit(path, argv[2], argv[3])
        return 0
    deadline = _wait_for_go(argv[-2], float(argv[-1]))
    if role == "ours":
        append_ours(path, argv[2], int(argv[3]), deadline)
    elif role == "deltalake":
        append_deltalake(path, argv[2], int(argv[3]), deadline)
    elif role == "rewrite":
        rewrite_loop(path, argv[2], deadline)
    else:
        raise SystemExit(f"unknown role {role}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
