"""One writer process of a soak run: appends unique ids forever and acknowledges each commit.

An id is acknowledged (a line in the ack file, flushed and fsynced) only after the engine said
the commit landed, so the driver can check that every acknowledged id is in the table. Our writer
sometimes commits from a snapshot it read many commits ago (an old reader racing log cleanup) and
may run with a clock ahead of the others (in-commit timestamps, clock skew).
"""

from __future__ import annotations

import argparse
import os
import random
import time

import pyarrow as pa

SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.string()), ("p", pa.string())])
ROWS = 5


def ids_of(writer: int, seq: int) -> list[int]:
    """The ids a writer's ``seq``-th batch holds (unique across writers and restarts)."""
    return [writer * 10**9 + seq * ROWS + i for i in range(ROWS)]


def _batch(writer: int, seq: int, rng: random.Random) -> pa.Table:
    ids = ids_of(writer, seq)
    part = rng.choice("abc")
    return pa.table({"id": ids, "writer": [str(writer)] * ROWS, "p": [part] * ROWS}, SCHEMA)


def _ack(fh: object, seq: int, version: int | None) -> None:
    fh.write(f"{seq} {-1 if version is None else version}\n")  # type: ignore[attr-defined]
    fh.flush()  # type: ignore[attr-defined]
    os.fsync(fh.fileno())  # type: ignore[attr-defined]


def run_ours(args: argparse.Namespace, rng: random.Random, ack: object) -> None:
    from txntable.engine.commit.transaction import CommitOptions, Transaction
    from txntable.engine.errors import EngineError
    from txntable.engine.table import Table
    from txntable.engine.write.writer import write_data_files

    skew = args.clock_skew_ms

    def clock() -> int:
        return int(time.time() * 1000) + skew

    table = Table.open(args.table)
    options = CommitOptions(clock_ms=clock, max_attempts=50)
    held = None  # a snapshot kept for a while, to commit from an old read version
    seq = args.first_seq
    while True:
        try:
            latest = table.snapshot()
            if held is None or rng.random() < 0.05:
                held = latest
            snapshot = held if rng.random() < args.old_snapshot_rate else latest
            txn = Transaction(table, snapshot, options)
            txn.add(
                *write_data_files(table.storage, snapshot.metadata, _batch(args.writer, seq, rng))
            )
            if args.hold and rng.random() < 0.2:
                time.sleep(args.hold)  # a slow writer: its files wait uncommitted
            result = txn.commit("WRITE")
            _ack(ack, seq, result.version)
        except EngineError as exc:
            print(f"writer {args.writer} seq {seq}: {type(exc).__name__}: {exc}", flush=True)
        seq += 1
        time.sleep(rng.uniform(0, args.pause))


def run_deltalake(args: argparse.Namespace, rng: random.Random, ack: object) -> None:
    from deltalake import write_deltalake

    seq = args.first_seq
    while True:
        try:
            write_deltalake(args.table, _batch(args.writer, seq, rng), mode="append")
            _ack(ack, seq, None)
        except Exception as exc:  # deltalake raises its own error types
            print(f"writer {args.writer} seq {seq}: {type(exc).__name__}: {exc}", flush=True)
        seq += 1
        time.sleep(rng.uniform(0, args.pause))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("table")
    parser.add_argument("--engine", choices=("ours", "deltalake"), required=True)
    parser.add_argument("--writer", type=int, required=True)
    parser.add_argument("--first-seq", type=int, default=0)
    parser.add_argument("--ack", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pause", type=float, default=0.05)
    parser.add_argument("--clock-skew-ms", type=int, default=0)
    parser.add_argument("--old-snapshot-rate", type=float, default=0.0)
    parser.add_argument(
        "--hold", type=float, default=0.0, help="seconds one commit in five waits after writing"
    )
    args = parser.parse_args()
    rng = random.Random(args.seed * 1000 + args.writer)
    with open(args.ack, "a", encoding="utf-8") as ack:
        if args.engine == "ours":
            run_ours(args, rng, ack)
        else:
            run_deltalake(args, rng, ack)


if __name__ == "__main__":
    main()
