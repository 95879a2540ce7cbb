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

Issue 33's harder round adds three things a platform sees (``cleanup``, ``shared``, ``retry``):

* log cleanup: the table keeps its log a day (``delta.logRetentionDuration``), each pass first
  ages the log older than the last ``YOUNG_VERSIONS`` versions, and older than every version a
  writer's statement in flight started from, by three days (time passing, as ``age_log`` does
  for a whole log; a statement is never three days old, so the files it reads stay), then the
  maintainer cleans up: ours with ``txntable
  cleanup``; delta-spark cleans up on its own after each of its checkpoints, in both rounds;
* shared partitions: every writer's rows are spread over the same two partitions (``p0``,
  ``p1``, by id) and its DELETE, UPDATE and MERGE name no partition, so writers fight each other
  and the maintainer for the same files;
* no retrying: a writer that loses a conflict gives the operation up (``lost_ops``, with the
  exception), as a job that fails and is not rerun; the model keeps what it had.

After each maintenance step Hadoop reads every file of ``_delta_log`` (a ``ChecksumException``
during the race is a problem of the round, with the step named); after the round, every file of
the table.

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
import contextlib
import json
import os
import random
import re
import sys
import threading
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator
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
#: in a round with log cleanup, the newest versions a pass leaves young (writers in flight read
#: from them; what is older is aged three days and is the cleanup's to delete)
YOUNG_VERSIONS = 10
SHARED_PARTITIONS = 2
#: a bound only: passes go on while the writers run (three stopped before the writers did)
MAX_PASSES = 12
STEPS = ("optimize", "checkpoint", "vacuum")
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


def _latest_version(log_dir: Path) -> int:
    """The newest commit version in a ``_delta_log`` listing (-1: none)."""
    versions = [
        int(e.name[:20])
        for e in log_dir.iterdir()
        if e.name.endswith(".json") and e.name[:20].isdigit()
    ]
    return max(versions, default=-1)


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
    #: operations a writer gave up (rounds without retrying), by "writer: exception"
    lost_ops: Counter[str] = field(default_factory=Counter)
    #: files of ``_delta_log`` Hadoop refused after a maintenance step, "step n: file" -> why
    hadoop_refused_during: dict[str, str] = field(default_factory=dict)
    conflicts: Counter[str] = field(default_factory=Counter)
    #: the first exception message of each conflict pair, to tell why when the winner is unnamed
    conflict_messages: dict[str, str] = field(default_factory=dict)
    maintenance: list[dict[str, Any]] = field(default_factory=list)
    #: files of the table Hadoop refused to read after the round, with why
    hadoop_refused: dict[str, str] = field(default_factory=dict)
    #: checksum files left without their file
    orphan_checksums: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: retained versions delta-spark was not asked to read: aged past the deleted-file
    #: retention, which delta-spark's time travel refuses by design (rounds with log cleanup)
    spark_refused_as_aged: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            **self.__dict__,
            "conflicts": dict(self.conflicts),
            "lost_ops": dict(self.lost_ops),
        }


class _Model:
    """The rows one writer's acknowledged operations leave: id -> (src, val)."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[str, int]] = {}
        self.lock = threading.Lock()


def _values(rows: list[tuple[int, str, int]], grp: str | None) -> str:
    """SQL rows; ``grp`` None spreads them over the shared partitions by id."""
    return ", ".join(f"({i}, '{s}', {v}, '{grp or _shared(i)}')" for i, s, v in rows)


def _shared(row_id: int) -> str:
    return f"p{row_id % SHARED_PARTITIONS}"


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
        cleanup: bool = False,
        shared: bool = False,
        retry: bool = True,
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
        self.cleanup = cleanup
        self.shared = shared
        self.retry = retry
        self.model = _Model()
        self.result = RoundResult(seed, maintainer)
        self.maintenance_versions: list[int] = []
        self.writers_done = threading.Event()
        #: writer -> the version its statement in flight started from (aging leaves it young)
        self.in_flight: dict[str, int] = {}

    # -- set-up ---------------------------------------------------------------------------
    def setup(self) -> None:
        props = "'delta.enableDeletionVectors' = 'true'"
        if self.checkpoint_interval is not None:
            props += f", 'delta.checkpointInterval' = '{int(self.checkpoint_interval)}'"
        if self.cleanup:
            # delta-spark wants the log kept at least as long as removed files
            props += (
                ", 'delta.logRetentionDuration' = 'interval 1 days'"
                ", 'delta.deletedFileRetentionDuration' = 'interval 1 hours'"
            )
        self.ds.sql(
            f"CREATE TABLE {self.ref} (id BIGINT, src STRING, val BIGINT, grp STRING) USING delta "
            f"PARTITIONED BY (grp) TBLPROPERTIES ({props})"
        )
        for grp, start in SEED_RANGES.items():
            rows = [(start + k, "seed", 0) for k in range(SEED_ROWS)]
            self.ds.sql(
                f"INSERT INTO {self.ref} SELECT /*+ REPARTITION(2) */ * FROM VALUES "
                f"{_values(rows, self._grp(grp))} AS v(id, src, val, grp)"
            )
            self.model.rows.update({i: (s, v) for i, s, v in rows})
        _compact_an_hour_ago(self.path)
        age_log(self.path, days=2 / 24)
        stamp = time.time() - 7200  # VACUUM deletes only files older than its retention
        for f in self.path.rglob("*.parquet"):
            if "_delta_log" not in f.parts:
                os.utime(f, (stamp, stamp))

    # -- writers ----------------------------------------------------------------------------
    def _grp(self, writer: str) -> str | None:
        """The partition of a writer's rows: its own, or (shared) none: spread by id."""
        return None if self.shared else writer

    def _in(self, writer: str) -> str:
        """The partition predicate of a writer's statements (none when partitions are shared)."""
        return "" if self.shared else f"grp = '{writer}' AND "

    def _run(self, writer: str, sql: str, apply: Callable[[], None]) -> None:
        for _ in range(8 if self.retry else 1):
            try:
                with self._in_flight(writer):
                    self.ds.sql(sql)
            except DeltaSparkError as exc:
                if not _CONFLICT.search(exc.java_class):
                    raise
                key = f"{writer} lost to {winner_of(exc.message)}: {exc.short_class}"
                with self.model.lock:
                    self.result.conflicts[key] += 1
                    self.result.conflict_messages.setdefault(key, exc.message[:1500])
                    if not self.retry:
                        self.result.lost_ops[f"{writer}: {exc.short_class}"] += 1
                        return
                time.sleep(0.2)
                continue
            with self.model.lock:
                apply()
                self.result.writer_ops += 1
            return
        raise AssertionError(f"{writer} lost 8 conflicts in a row: {sql[:200]}")

    @contextlib.contextmanager
    def _in_flight(self, writer: str) -> Iterator[None]:
        """While a statement runs, the version it started from (or a newer one: delta-spark
        reads the log after this) is in ``in_flight``; the log aging spares it."""
        with self.model.lock:
            self.in_flight[writer] = _latest_version(self.path / "_delta_log")
        try:
            yield
        finally:
            with self.model.lock:
                del self.in_flight[writer]

    def _writer(self, writer: str) -> None:
        rng = random.Random(f"{self.seed}-{writer}")
        rows = self.model.rows
        for i in range(self.ops):
            time.sleep(rng.uniform(0, 1.0))
            if writer == "append":
                new = [(APPEND_BASE + i * 5 + k, "append", 0) for k in range(5)]
                self._run(
                    writer,
                    f"INSERT INTO {self.ref} VALUES {_values(new, self._grp(writer))}",
                    lambda new=new: rows.update({a: (b, c) for a, b, c in new}),
                )
            elif writer == "delete":
                ids = [SEED_RANGES["delete"] + i * 6 + k for k in range(6)]
                self._run(
                    writer,
                    f"DELETE FROM {self.ref} WHERE {self._in('delete')}id IN ({_ids(ids)})",
                    lambda ids=ids: [rows.pop(k, None) for k in ids],
                )
            elif writer == "update":
                ids = rng.sample(range(SEED_RANGES["update"], SEED_RANGES["update"] + SEED_ROWS), 8)
                val = i + 1
                self._run(
                    writer,
                    f"UPDATE {self.ref} SET val = {val} "
                    f"WHERE {self._in('update')}id IN ({_ids(ids)})",
                    lambda ids=ids, val=val: rows.update({k: (rows[k][0], val) for k in ids}),
                )
            else:
                old = rng.sample(range(SEED_RANGES["merge"], SEED_RANGES["merge"] + SEED_ROWS), 3)
                new_ids = [MERGE_NEW + i * 2 + k for k in range(2)]
                val = 100 + i
                source = ", ".join(
                    f"({k}, {val}, '{self._grp(writer) or _shared(k)}')" for k in [*old, *new_ids]
                )
                sql = (
                    f"MERGE INTO {self.ref} t "
                    f"USING (SELECT * FROM VALUES {source} AS s(id, val, grp)) s "
                    f"ON {self._in('merge').replace('grp', 't.grp')}t.id = s.id "
                    "WHEN MATCHED THEN UPDATE SET t.val = s.val "
                    "WHEN NOT MATCHED THEN INSERT (id, src, val, grp) "
                    "VALUES (s.id, 'merge', s.val, s.grp)"
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
        steps = ("optimize", "checkpoint", "cleanup", "vacuum") if self.cleanup else STEPS
        for _ in range(MAX_PASSES):
            for step in steps:
                time.sleep(rng.uniform(0.2, 1.5))
                started = time.monotonic()
                entry: dict[str, Any] = {"step": step}
                if step == "cleanup":
                    entry["aged"] = self._age_old_log()
                if self.maintainer == "ours":
                    entry.update(self._ours(step))
                else:
                    entry.update(self._theirs(step))
                entry["seconds"] = round(time.monotonic() - started, 2)
                self.result.maintenance.append(entry)
                self._hadoop_reads_log(f"{step} {len(self.result.maintenance)}")
            if self.writers_done.wait(rng.uniform(0.5, 2.0)):
                return

    def _age_old_log(self) -> int:
        """Age the log files of every version but the newest ``YOUNG_VERSIONS``, and below
        every version a writer's statement in flight started from, three days, keeping their
        order (version ``v`` gets ``v`` seconds more): a day's retention has then passed for
        them. Returns the newest version aged (-1: none).

        A cleanup deletes only what is older than its newest expired checkpoint, and that is at
        most the newest version aged, so the checkpoint and commits a statement in flight reads
        stay: once a MERGE read checkpoint 22 while the streaming appends and delta-spark's
        checkpoints every 3 commits carried the table ten versions past it, and the cleanup
        took the checkpoint from under the statement, three simulated days into it."""
        log_dir = self.path / "_delta_log"
        names = [e.name for e in log_dir.iterdir()]
        versions = [int(n[:20]) for n in names if n[:20].isdigit() and n.endswith(".json")]
        newest = max(versions, default=-1) - YOUNG_VERSIONS
        with self.model.lock:
            newest = min([newest, *(v - 1 for v in self.in_flight.values())])
        base = time.time() - 3 * 86_400
        for name in names:
            head = name.split(".", 1)[0]
            if head.isdigit() and len(head) == 20 and int(head) <= newest:
                stamp = base + int(head)
                # a cleanup of delta-spark's may take it meanwhile
                with contextlib.suppress(FileNotFoundError):
                    os.utime(log_dir / name, (stamp, stamp))
        return newest

    def _hadoop_reads_log(self, step: str) -> None:
        """Hadoop reads every file of the log after a maintenance step: a checksum that no
        longer matches is a problem; a file gone between listing and reading (delta-spark's own
        cleanup, ours) is not."""
        for name, why in hadoop_refusals(self.ds, self.path / "_delta_log").items():
            if "ChecksumException" in why:
                self.result.hadoop_refused_during[f"{step}: {name}"] = why

    def _ours(self, step: str) -> dict[str, Any]:
        args = {
            "optimize": ["--executor", "arrow"],
            "checkpoint": [],
            "cleanup": [],
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
        if step == "cleanup":
            return {k: doc.get(k) for k in ("checkpointVersion", "numDeleted", "skipped")}
        if step == "checkpoint":
            self.maintenance_versions.append(int(doc["version"]))
        # existing: our checkpoint found delta-spark's at that version and kept it
        return {k: doc.get(k) for k in ("version", "numDeleted", "parts", "existing") if k in doc}

    def _theirs(self, step: str) -> dict[str, Any]:
        if step == "cleanup":  # delta-spark cleans up after its own checkpoints
            return {}
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
                (
                    f"CONCAT('p', CAST((value + {STREAM_BASE}) % {SHARED_PARTITIONS} AS STRING))"
                    " AS grp"
                    if self.shared
                    else "'stream' AS grp"
                ),
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
        if self.result.hadoop_refused_during:
            problems.append(
                f"Hadoop refused log files after a maintenance step: "
                f"{dict(list(self.result.hadoop_refused_during.items())[:5])}"
            )
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
        if self.cleanup:
            # delta-spark refuses to time travel to a commit older than the table's
            # deletedFileRetentionDuration (DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_
            # RETENTION_DURATION): the log the round aged is deltalake's to read alone
            young = self._young_versions()
            self.result.spark_refused_as_aged = len([v for v in chosen if v not in young])
            chosen = [v for v in chosen if v in young] or [latest]
        spark = self.ds.call("read_versions", path=str(self.path), versions=chosen)["versions"]
        for v in chosen:
            if spark[str(v)]["digest"] != theirs.get(v, {}).get("digest"):
                problems.append(f"delta-spark and deltalake read other rows at version {v}")

    def _young_versions(self) -> set[int]:
        """Versions whose commit is younger than the round's deleted-file retention (an hour,
        with a minute's margin): the ones delta-spark lets a reader travel to."""
        limit = time.time() - 3600 + 60
        log_dir = self.path / "_delta_log"
        young = set()
        for entry in log_dir.glob("*.json"):
            head = entry.name[:20]
            with contextlib.suppress(FileNotFoundError):
                if head.isdigit() and entry.stat().st_mtime > limit:
                    young.add(int(head))
        return young

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
            words = exc.causes if isinstance(exc, DeltaSparkError) else str(exc)
            result.problems.append(
                f"{arg or 'maintainer'} failed: {type(exc).__name__}: {words}"[:3000]
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
    from txntable.api.optimize_options import OptimizeOptions
    from txntable.maintenance import optimize as optimize_module
    from txntable.maintenance.executor_arrow import ArrowExecutor

    shifted = types.SimpleNamespace(
        **{k: getattr(time, k) for k in dir(time) if not k.startswith("_")}
    )
    shifted.time = lambda: time.time() - 7200
    real = optimize_module.time
    optimize_module.time = shifted  # type: ignore[assignment]
    try:
        optimize_module.optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor(workers=1))
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
    parser.add_argument(
        "--cleanup",
        action="store_true",
        help="a day's log retention, the old log aged each pass, and log cleanup in each pass",
    )
    parser.add_argument(
        "--shared-partitions",
        action="store_true",
        help="every writer's rows in the same two partitions, its statements naming none",
    )
    parser.add_argument(
        "--no-retry", action="store_true", help="a writer that loses a conflict gives it up"
    )
    parser.add_argument(
        "--maintainers",
        default="ours,delta-spark",
        help="comma-separated: ours, delta-spark (the reference); default both",
    )
    args = parser.parse_args(argv)
    maintainers = [m.strip() for m in args.maintainers.split(",") if m.strip()]
    unknown = set(maintainers) - {"ours", "delta-spark"}
    if unknown or not maintainers:
        parser.error(f"--maintainers: one or both of ours, delta-spark (got {args.maintainers!r})")
    import shutil

    shutil.rmtree(args.root, ignore_errors=True)
    args.root.mkdir(parents=True)
    results = []
    with DeltaSpark(log_dir=args.root / "deltaspark") as ds:
        for seed in (int(s) for s in args.seeds.split(",")):
            for maintainer in maintainers:
                r = Round(
                    ds,
                    args.root,
                    seed,
                    maintainer,
                    ops=args.ops,
                    full_reads=True,
                    checkpoint_interval=args.checkpoint_interval,
                    cleanup=args.cleanup,
                    shared=args.shared_partitions,
                    retry=not args.no_retry,
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
        "| maintainer | rounds | acknowledged rows | writer ops | ops given up | versions read "
        "| Hadoop refusals | problems |",
        "|---|---|---|---|---|---|---|---|",
    ]
    conflicts: dict[str, Counter[str]] = {"ours": Counter(), "delta-spark": Counter()}
    for who in ("ours", "delta-spark"):
        rs = [r for r in results if r.maintainer == who]
        for r in rs:
            conflicts[who].update(r.conflicts)
        lines.append(
            f"| {who} | {len(rs)} | {sum(r.acknowledged_rows for r in rs)} | "
            f"{sum(r.writer_ops for r in rs)} | {sum(sum(r.lost_ops.values()) for r in rs)} | "
            f"{sum(r.versions for r in rs)} | "
            f"{sum(len(r.hadoop_refused) + len(r.hadoop_refused_during) for r in rs)} | "
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
