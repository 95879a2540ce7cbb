"""Races between delta-spark writers and table maintenance, ours or delta-spark's (issue 21.4).

One round: delta-spark makes a table with deletion vectors on, partitioned by writer (``grp``:
writers do not fight each other, so the conflicts counted are with the maintainer), seeded with
rows the DELETE, UPDATE and MERGE writers own; its old files are compacted two hours in the past
(our OPTIMIZE in-process with its clock set back, the log aged to match), so a VACUUM with a
one-hour retention has real files to delete during the race and must keep everything younger.
Then, at once:

* four delta-spark writers, each owning its ids and running ``ops`` operations with seeded random
  pauses: INSERT (append), DELETE, UPDATE, MERGE (update and insert); a writer that loses a
  conflict records it and runs the same operation again, as an application would;
* a structured-streaming query appending through Delta's streaming sink (``rate-micro-batch``
  source: batch ``b`` carries a known id range);
* the maintainer, in passes with seeded pauses until the writers are done: OPTIMIZE, checkpoint,
  VACUUM (one-hour retention) —
  ours (``txntable optimize|checkpoint|vacuum``) or, for the reference, delta-spark's own
  (``OPTIMIZE``, ``DeltaLog.checkpoint``, ``VACUUM ... RETAIN 1 HOURS``).

With ``checkpoint_interval`` delta-spark checkpoints the table on its own every that many
commits, racing our checkpoints at the same versions (issue 33 used 3).

Then the checks: Hadoop's ``LocalFileSystem`` in delta-spark's JVM reads every file of the table
(a checksum file ``.<name>.crc`` that no longer matches its file makes it refuse the file) and no
checksum file is left without its file; every acknowledged row is there with the value its last
acknowledged operation gave it, no deleted row is back, no row is there twice, every
acknowledged streaming batch is there; every retained version is read by deltalake, and
delta-spark reads the latest and the versions around the maintainer's commits (``full_reads``:
every version) with the same rows as deltalake. Conflicts are counted per (loser, winner
operation, exception) pair.

Conflicts must follow the rules Delta gives for each pair (``rule_breaches``), in the rounds of
both maintainers: the reference rounds show the rules are Delta's, not ours.

Used by ``tests/integration/test_deltaspark_races.py`` (one round with our maintenance in
``make test``) and by ``python -m tests.deltaspark.race`` (``make soak-deltaspark``: rounds of
both maintainers for many seeds, the figures for docs/reliability.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import threading
import time
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests import oracle_read
from tests.deltaspark.client import DeltaSpark, DeltaSparkError
from tests.deltaspark.support import (
    age_log,
    checksum_files,
    hadoop_refusals,
    retained_versions,
    txntable,
)
from txntable.engine.table import Table

SEED_RANGES = {"delete": 1_000, "update": 2_000, "merge": 3_000}
SEED_ROWS = 40
MERGE_NEW, APPEND_BASE, STREAM_BASE = 4_000, 100_000, 500_000
RETENTION = "interval 1 hours"
#: a bound only: passes go on while the writers run (three stopped before the writers did)
MAX_PASSES = 12
#: what a DELETE, UPDATE or MERGE may lose to an OPTIMIZE that removed files it read: delta-spark
#: checks added files first, so OPTIMIZE's dataChange=false adds in a partition it read give
#: ConcurrentAppendException before the removes give ConcurrentDeleteRead (seen every time in
#: tests/integration/test_deltaspark_interleavings.py; the engine brief's 5.9 allows either)
ALLOWED_WRITER_LOSSES = {
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
}
_CONFLICT = re.compile(r"Concurrent|ProtocolChanged|MetadataChanged")
#: the winner's operation: a commitInfo in the message, else delta-spark's own words ("a
#: concurrent UPDATE deleted data in the partition ...", "... by a concurrent OPTIMIZE")
_OPERATION = re.compile(r'"operation"\s*:\s*"([^"]+)"')
_CONCURRENT_OPERATION = re.compile(r"\ba concurrent ([A-Z][A-Z ]*[A-Z])\b")


def winner_of(message: str) -> str:
    """The operation that won a conflict, as delta-spark's exception message names it; ``?``."""
    found = _OPERATION.search(message) or _CONCURRENT_OPERATION.search(message)
    return found.group(1) if found else "?"


@dataclass
class RoundResult:
    seed: int
    maintainer: str
    acknowledged_rows: int = 0
    stream_batches: int = 0
    versions: int = 0
    writer_ops: int = 0
    conflicts: Counter[str] = field(default_factory=Counter)
    #: the first exception message of each conflict pair, to tell why when the winner is unnamed
    conflict_messages: dict[str, str] = field(default_factory=dict)
    maintenance: list[dict[str, Any]] = field(default_factory=list)
    #: files of the table Hadoop refused to read after the round, with why
    hadoop_refused: dict[str, str] = field(default_factory=dict)
    #: checksum files left without their file
    orphan_checksums: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "conflicts": dict(self.conflicts)}


class _Model:
    """The rows one writer's acknowledged operations leave: id -> (src, val)."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[str, int]] = {}
        self.lock = threading.Lock()


def _values(rows: list[tuple[int, str, int]], grp: str) -> str:
    return ", ".join(f"({i}, '{s}', {v}, '{grp}')" for i, s, v in rows)


class Round:
    def __init__(
        self,
        ds: DeltaSpark,
        root: Path,
        seed: int,
        maintainer: str,
        *,
        ops: int = 3,
        full_reads: bool = False,
        checkpoint_interval: int | None = None,
    ) -> None:
        assert maintainer in ("ours", "delta-spark")
        self.ds = ds
        self.path = root / f"race-{maintainer}-{seed}"
        self.ref = f"delta.`{self.path}`"
        self.seed = seed
        self.maintainer = maintainer
        self.ops = ops
        self.full_reads = full_reads
        self.checkpoint_interval = checkpoint_interval
        self.model = _Model()
        self.result = RoundResult(seed, maintainer)
        self.maintenance_versions: list[int] = []
        self.writers_done = threading.Event()

    # -- set-up ---------------------------------------------------------------------------
    def setup(self) -> None:
        props = "'delta.enableDeletionVectors' = 'true'"
        if self.checkpoint_interval is not None:
            props += f", 'delta.checkpointInterval' = '{int(self.checkpoint_interval)}'"
        self.ds.sql(
            f"CREATE TABLE {self.ref} (id BIGINT, src STRING, val BIGINT, grp STRING) USING delta "
            f"PARTITIONED BY (grp) TBLPROPERTIES ({props})"
        )
        for grp, start in SEED_RANGES.items():
            rows = [(start + k, "seed", 0) for k in range(SEED_ROWS)]
            self.ds.sql(
                f"INSERT INTO {self.ref} SELECT /*+ REPARTITION(2) */ * FROM VALUES "
                f"{_values(rows, grp)} AS v(id, src, val, grp)"
            )
            self.model.rows.update({i: (s, v) for i, s, v in rows})
        _compact_an_hour_ago(self.path)
        age_log(self.path, days=2 / 24)
        stamp = time.time() - 7200  # VACUUM deletes only files older than its retention
        for f in self.path.rglob("*.parquet"):
            if "_delta_log" not in f.parts:
                os.utime(f, (stamp, stamp))

    # -- writers ----------------------------------------------------------------------------
    def _run(self, writer: str, sql: str, apply: Callable[[], None]) -> None:
        for _ in range(8):
            try:
                self.ds.sql(sql)
            except DeltaSparkError as exc:
                if not _CONFLICT.search(exc.java_class):
                    raise
                key = f"{writer} lost to {winner_of(exc.message)}: {exc.short_class}"
                with self.model.lock:
                    self.result.conflicts[key] += 1
                    self.result.conflict_messages.setdefault(key, exc.message[:1500])
                time.sleep(0.2)
                continue
            with self.model.lock:
                apply()
                self.result.writer_ops += 1
            return
        raise AssertionError(f"{writer} lost 8 conflicts in a row: {sql[:200]}")

    def _writer(self, writer: str) -> None:
        rng = random.Random(f"{self.seed}-{writer}")
        rows = self.model.rows
        for i in range(self.ops):
            time.sleep(rng.uniform(0, 1.0))
            if writer == "append":
                new = [(APPEND_BASE + i * 5 + k, "append", 0) for k in range(5)]
                self._run(
                    writer,
                    f"INSERT INTO {self.ref} VALUES {_values(new, writer)}",
                    lambda new=new: rows.update({a: (b, c) for a, b, c in new}),
                )
            elif writer == "delete":
                ids = [SEED_RANGES["delete"] + i * 6 + k for k in range(6)]
                self._run(
                    writer,
                    f"DELETE FROM {self.ref} WHERE grp = 'delete' AND id IN ({_ids(ids)})",
                    lambda ids=ids: [rows.pop(k, None) for k in ids],
                )
            elif writer == "update":
                ids = rng.sample(range(SEED_RANGES["update"], SEED_RANGES["update"] + SEED_ROWS), 8)
                val = i + 1
                self._run(
                    writer,
                    f"UPDATE {self.ref} SET val = {val} "
                    f"WHERE grp = 'update' AND id IN ({_ids(ids)})",
                    lambda ids=ids, val=val: rows.update({k: (rows[k][0], val) for k in ids}),
                )
            else:
                old = rng.sample(range(SEED_RANGES["merge"], SEED_RANGES["merge"] + SEED_ROWS), 3)
                new_ids = [MERGE_NEW + i * 2 + k for k in range(2)]
                val = 100 + i
                source = ", ".join(f"({k}, {val})" for k in [*old, *new_ids])
                sql = (
                    f"MERGE INTO {self.ref} t "
                    f"USING (SELECT * FROM VALUES {source} AS s(id, val)) s "
                    "ON t.grp = 'merge' AND t.id = s.id WHEN MATCHED THEN UPDATE SET t.val = s.val "
                    "WHEN NOT MATCHED THEN INSERT (id, src, val, grp) "
                    "VALUES (s.id, 'merge', s.val, 'merge')"
                )

                def merged(
                    old: list[int] = old, new_ids: list[int] = new_ids, val: int = val
                ) -> None:
                    for k in old:
                        rows[k] = (rows[k][0], val)
                    for k in new_ids:
                        rows[k] = ("merge", val)

                self._run(writer, sql, merged)

    # -- the maintainer -------------------------------------------------------------------------
    def _maintain(self) -> None:
        """Passes of OPTIMIZE, checkpoint, VACUUM with seeded pauses, until the writers are done
        (at least one pass, at most ``MAX_PASSES``)."""
        rng = random.Random(f"{self.seed}-maintainer")
        for _ in range(MAX_PASSES):
            for step in ("optimize", "checkpoint", "vacuum"):
                time.sleep(rng.uniform(0.2, 1.5))
                started = time.monotonic()
                entry: dict[str, Any] = {"step": step}
                if self.maintainer == "ours":
                    entry.update(self._ours(step))
                else:
                    entry.update(self._theirs(step))
                entry["seconds"] = round(time.monotonic() - started, 2)
                self.result.maintenance.append(entry)
            if self.writers_done.wait(rng.uniform(0.5, 2.0)):
                return

    def _ours(self, step: str) -> dict[str, Any]:
        args = {
            "optimize": ["--executor", "arrow"],
            "checkpoint": [],
            "vacuum": ["--retention", RETENTION, "--force"],
        }[step]
        done = txntable(step, str(self.path), *args, check=False)
        if done.code != 0:
            return {"error": done.stderr.strip()[-800:]}
        doc = done.doc or {}
        if step == "optimize":
            if doc.get("commits"):
                self.maintenance_versions.extend(int(c) for c in doc["commits"])
            lost = Counter(s["reason"].split(" (")[0] for s in doc.get("skipped") or [])
            winners = _removers_between(self.path, doc.get("readVersion"), doc.get("version"))
            for reason, n in lost.items():
                self.result.conflicts[f"OPTIMIZE bins lost to {winners}: {reason}"] += n
            return {
                "filesRemoved": doc.get("numFilesRemoved"),
                "binsSkipped": doc.get("binsSkipped"),
            }
        if step == "checkpoint":
            self.maintenance_versions.append(int(doc["version"]))
        # existing: our checkpoint found delta-spark's at that version and kept it
        return {k: doc.get(k) for k in ("version", "numDeleted", "parts", "existing") if k in doc}

    def _theirs(self, step: str) -> dict[str, Any]:
        try:
            if step == "optimize":
                before = Table.open(str(self.path)).version()
                self.ds.sql(f"OPTIMIZE {self.ref}")
                after = Table.open(str(self.path)).version()
                if after > before:
                    self.maintenance_versions.append(after)
            elif step == "checkpoint":
                self.maintenance_versions.append(
                    self.ds.call("checkpoint", path=str(self.path))["version"]
                )
            else:
                self.ds.sql(f"VACUUM {self.ref} RETAIN 1 HOURS")
        except DeltaSparkError as exc:
            if not _CONFLICT.search(exc.java_class):
                return {"error": str(exc)[:800]}
            key = f"OPTIMIZE lost to {winner_of(exc.message)}: {exc.short_class}"
            self.result.conflicts[key] += 1
            self.result.conflict_messages.setdefault(key, exc.message[:1500])
            return {"conflict": exc.short_class}
        return {}

    # -- one round ------------------------------------------------------------------------------
    def run(self) -> RoundResult:
        started = time.monotonic()
        self.setup()
        stream = self.ds.call(
            "stream_start",
            path=str(self.path),
            checkpoint=str(self.path.parent / f"{self.path.name}-stream"),
            rows_per_batch=10,
            interval_ms=1500,
            select=[
                f"value + {STREAM_BASE} AS id",
                "'stream' AS src",
                "CAST(0 AS BIGINT) AS val",
                "'stream' AS grp",
            ],
        )["query"]
        writers = [
            threading.Thread(target=_catching(self._writer, w, self.result), name=w)
            for w in ("append", "delete", "update", "merge")
        ]
        maintainer = threading.Thread(target=_catching(self._maintain, None, self.result))
        for t in [*writers, maintainer]:
            t.start()
        for t in writers:
            t.join()
        self.writers_done.set()
        maintainer.join()
        stopped = self.ds.call("stream_stop", query=stream)
        if stopped.get("error"):
            self.result.problems.append(f"streaming query failed: {stopped['error']}")
        self.check(stopped["batches"])
        self.result.seconds = round(time.monotonic() - started, 1)
        return self.result

    # -- the checks -----------------------------------------------------------------------------
    def check(self, batches: list[dict[str, Any]]) -> None:
        problems = self.result.problems
        self.result.hadoop_refused = hadoop_refusals(self.ds, self.path)
        self.result.orphan_checksums = checksum_files(self.path)[1]
        if self.result.hadoop_refused:
            problems.append(f"Hadoop refuses to read {self.result.hadoop_refused}")
        if self.result.orphan_checksums:
            problems.append(
                f"{len(self.result.orphan_checksums)} checksum files without their file: "
                f"{self.result.orphan_checksums[:10]}"
            )
        got = self.ds.read(self.path, want_rows=True)
        ids = Counter(r["id"] for r in got["rows"])
        twice = sorted(k for k, n in ids.items() if n > 1)
        if twice:
            problems.append(f"ids read more than once: {twice[:20]}")
        table_rows = {r["id"]: (r["src"], r["val"]) for r in got["rows"]}
        expected = self.model.rows
        mine = {k: v for k, v in table_rows.items() if k < STREAM_BASE}
        lost = sorted(set(expected) - set(mine))
        extra = sorted(set(mine) - set(expected))
        wrong = sorted(k for k in set(expected) & set(mine) if expected[k] != mine[k])
        if lost:
            problems.append(f"acknowledged rows lost: {lost[:20]}")
        if extra:
            problems.append(f"rows resurrected or never acknowledged: {extra[:20]}")
        if wrong:
            problems.append(f"rows with another value than acknowledged: {wrong[:20]}")
        unparsed = [b for b in batches if "error" in b]
        if unparsed:
            problems.append(f"streaming progress not understood: {unparsed[:5]}")
        batches = [b for b in batches if "error" not in b]
        acked = {STREAM_BASE + v for b in batches for v in range(b["start"], b["end"])}
        streamed = {k for k in table_rows if k >= STREAM_BASE}
        if acked - streamed:
            problems.append(f"acknowledged streaming rows lost: {sorted(acked - streamed)[:20]}")
        self.result.stream_batches = len(batches)
        self.result.acknowledged_rows = len(expected) + len(acked)
        versions = retained_versions(self.path)
        self.result.versions = len(versions)
        theirs = oracle_read.read_versions(self.path, versions)
        unreadable = {v: r["error"] for v, r in theirs.items() if "error" in r}
        if unreadable:
            problems.append(f"deltalake could not read versions {unreadable}")
        latest = versions[-1]
        if theirs.get(latest, {}).get("digest") != got["digest"]:
            problems.append(f"deltalake reads other rows than delta-spark at {latest}")
        chosen = versions if self.full_reads else self._around_maintenance(versions)
        spark = self.ds.call("read_versions", path=str(self.path), versions=chosen)["versions"]
        for v in chosen:
            if spark[str(v)]["digest"] != theirs.get(v, {}).get("digest"):
                problems.append(f"delta-spark and deltalake read other rows at version {v}")

    def _around_maintenance(self, versions: list[int]) -> list[int]:
        """The latest version, and before and after the first, the last and one more of the
        maintainer's commits (a time-travel read costs delta-spark several Spark jobs)."""
        wanted = {versions[-1]}
        ours = sorted(set(self.maintenance_versions))
        rng = random.Random(f"{self.seed}-reads")
        for v in {*ours[:1], *ours[-1:], *rng.sample(ours, min(1, len(ours)))}:
            wanted.update({v - 1, v})
        return sorted(wanted & set(versions))


def _ids(ids: list[int]) -> str:
    return ", ".join(str(k) for k in ids)


def _catching(fn: Callable[..., None], arg: Any, result: RoundResult) -> Callable[[], None]:
    def run() -> None:
        try:
            fn(arg) if arg is not None else fn()
        except Exception as exc:  # reported as a problem of the round, with the writer named
            result.problems.append(
                f"{arg or 'maintainer'} failed: {type(exc).__name__}: {exc}"[:1500]
            )

    return run


def _removers_between(path: Path, read_version: int | None, own: int | None) -> str:
    """The operations that removed files after OPTIMIZE read the table (who won its bins)."""
    if read_version is None:
        return "?"
    table = Table.open(str(path))
    names = set()
    for entry in table.history():
        v = int(entry.get("version", -1))
        if (
            v > read_version
            and (own is None or v < own)
            and entry.get("operation")
            in (
                "DELETE",
                "UPDATE",
                "MERGE",
            )
        ):
            names.add(entry["operation"])
    return "/".join(sorted(names)) or "?"


def _compact_an_hour_ago(path: Path) -> None:
    """OPTIMIZE the seeded files with the clock two hours back: their tombstones are then older
    than the race's one-hour VACUUM retention."""
    from txntable.maintenance import optimize as optimize_module
    from txntable.maintenance.executor_arrow import ArrowExecutor
    from txntable.maintenance.planner import OptimizePolicy

    shifted = types.SimpleNamespace(
        **{k: getattr(time, k) for k in dir(time) if not k.startswith("_")}
    )
    shifted.time = lambda: time.time() - 7200
    real = optimize_module.time
    optimize_module.time = shifted  # type: ignore[assignment]
    try:
        optimize_module.optimize(Table.open(str(path)), OptimizePolicy(), ArrowExecutor(workers=1))
    finally:
        optimize_module.time = real


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.deltaspark.race", description=__doc__)
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds (one round each)")
    parser.add_argument("--ops", type=int, default=4, help="operations per writer and round")
    parser.add_argument("--root", type=Path, default=Path("/tmp/txntable-deltaspark-race"))
    parser.add_argument("--json", type=Path, help="write the rounds' results here")
    parser.add_argument(
        "--checkpoint-interval",
        type=int,
        default=None,
        help="delta-spark checkpoints every N commits on its own (default: its 10)",
    )
    args = parser.parse_args(argv)
    import shutil

    shutil.rmtree(args.root, ignore_errors=True)
    args.root.mkdir(parents=True)
    results = []
    with DeltaSpark(log_dir=args.root / "deltaspark") as ds:
        for seed in (int(s) for s in args.seeds.split(",")):
            for maintainer in ("ours", "delta-spark"):
                r = Round(
                    ds,
                    args.root,
                    seed,
                    maintainer,
                    ops=args.ops,
                    full_reads=True,
                    checkpoint_interval=args.checkpoint_interval,
                ).run()
                print(json.dumps(r.to_json()), flush=True)
                results.append(r)
    print(summarize(results))
    breaches = {f"{r.maintainer} seed {r.seed}": rule_breaches(r) for r in results}
    breaches = {k: v for k, v in breaches.items() if v}
    for key, found in breaches.items():
        print(f"conflicts against Delta's rules, {key}: {found}", flush=True)
    if args.json:
        args.json.write_text(json.dumps([r.to_json() for r in results], indent=1))
    return 1 if breaches or any(r.problems for r in results) else 0


def rule_breaches(result: RoundResult) -> list[str]:
    """The conflicts of a round that Delta's rules for the pair do not allow: a blind append
    (INSERT, the streaming sink) never loses to maintenance; a DELETE, UPDATE or MERGE loses to
    an OPTIMIZE only with ``ALLOWED_WRITER_LOSSES``; a checkpoint or a VACUUM makes no writer
    lose. (Where the maintainers differ by design, e.g. delta-spark's OPTIMIZE failing as a
    whole, ours giving up bins, the pair is counted, not judged.)"""
    wrong = []
    for key in result.conflicts:
        loser, rest = key.split(" lost to ", 1)
        winner, exception = rest.split(": ", 1)
        if loser in ("append", "stream"):
            wrong.append(f"a blind append lost a conflict: {key}")
        elif (
            loser in ("delete", "update", "merge")
            and "OPTIMIZE" in winner
            and exception not in ALLOWED_WRITER_LOSSES
        ):
            wrong.append(f"a writer lost to OPTIMIZE with another exception: {key}")
        if any(op in winner for op in ("VACUUM", "CHECKPOINT")):
            wrong.append(f"lost to a checkpoint or VACUUM: {key}")
    return wrong


def summarize(results: list[RoundResult]) -> str:
    """Markdown: rounds, acknowledged rows, problems and conflicts per pair, ours against
    delta-spark's."""
    lines = [
        "| maintainer | rounds | acknowledged rows | writer ops | versions read | problems |",
        "|---|---|---|---|---|---|",
    ]
    conflicts: dict[str, Counter[str]] = {"ours": Counter(), "delta-spark": Counter()}
    for who in ("ours", "delta-spark"):
        rs = [r for r in results if r.maintainer == who]
        for r in rs:
            conflicts[who].update(r.conflicts)
        lines.append(
            f"| {who} | {len(rs)} | {sum(r.acknowledged_rows for r in rs)} | "
            f"{sum(r.writer_ops for r in rs)} | {sum(r.versions for r in rs)} | "
            f"{sum(len(r.problems) for r in rs)} |"
        )
    lines += [
        "",
        "| conflict (loser, winner, exception) | with our maintenance | with delta-spark's |",
        "|---|---|---|",
    ]
    for key in sorted(set(conflicts["ours"]) | set(conflicts["delta-spark"])):
        lines.append(f"| {key} | {conflicts['ours'][key]} | {conflicts['delta-spark'][key]} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
