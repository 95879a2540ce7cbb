"""Deterministic interleavings of our OPTIMIZE with delta-spark's writers: the parts the tests
share.

``PausedOptimize`` runs the OPTIMIZE job (``python -m txntable.jobs.optimize``, Arrow executor,
local) until a named pause point (``engine/testhooks.py``): ``optimize:rewritten`` (the bins are
rewritten; the job has not yet checked its inputs against the latest version) or
``optimize:committing`` (the batch's transaction has its snapshot and actions; the engine's
conflict checker will judge whatever lands now). The test has delta-spark commit one operation
there, then lets the job go on.

``Gate`` is the reverse: a delta-spark statement calls ``txn_gate`` (``tests/deltaspark/server.py``)
after its transaction took its snapshot and blocks there; our OPTIMIZE runs to its end; the gate
opens and delta-spark's conflict checker judges our commit.

``Rows`` is what the table must hold, kept from what the test wrote, never from a reader under
test; ``check_table`` holds delta-spark's read, deltalake's (a child process) and ours to it,
has DESCRIBE HISTORY parse the log and a further delta-spark write land on top (read back by
our reader).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import REPO
from tests.deltaspark.client import DeltaSpark
from tests.deltaspark.support import check_history
from tests.table_reads import load, rows, start_deltalake_reads
from txntable.engine.testhooks import MARKER_ENV, PAUSE_ENV, RESUME_ENV

#: ids 0..23; even ids in partition ``a``, odd in ``b``
BASE_IDS = range(24)
#: delta-spark writes the base rows as this many files per partition (one commit)
FILES = 4


def sql_table(path: Path) -> str:
    return "delta.`" + str(path).replace("`", "``") + "`"


def base_row(i: int) -> dict[str, Any]:
    return {"id": i, "p": "a" if i % 2 == 0 else "b", "v": i * 10}


def make_template(ds: DeltaSpark, path: Path, *, partitioned: bool, dv: bool) -> Path:
    """delta-spark creates the table with the base rows in ``FILES`` files per partition (four
    tasks of a round-robin repartition, one commit), deletion vectors on or off."""
    values = ", ".join(f"({r['id']}, '{r['p']}', {r['v']})" for r in map(base_row, BASE_IDS))
    ds.sql(
        f"CREATE TABLE {sql_table(path)} USING delta "
        + ("PARTITIONED BY (p) " if partitioned else "")
        + f"TBLPROPERTIES ('delta.enableDeletionVectors' = '{str(dv).lower()}') "
        + f"AS SELECT /*+ REPARTITION({FILES}) */ * FROM VALUES {values} AS s(id, p, v)"
    )
    return path


def copy_table(template: Path, path: Path) -> Path:
    """A private copy of a template (every path in the log is relative)."""
    shutil.copytree(template, path)
    return path


@dataclass
class Rows:
    """The rows the table must hold, by id."""

    by_id: dict[int, dict[str, Any]] = field(
        default_factory=lambda: {i: base_row(i) for i in BASE_IDS}
    )

    def add(self, *new: dict[str, Any]) -> None:
        for row in new:
            self.by_id[row["id"]] = dict(row)

    def delete(self, *ids: int) -> None:
        for i in ids:
            del self.by_id[i]

    def replace_partition(self, partition: str, *new: dict[str, Any]) -> None:
        """An overwrite of one partition: its rows go, ``new`` come."""
        self.delete(*[i for i, r in self.by_id.items() if r["p"] == partition])
        self.add(*new)

    def set(self, i: int, **values: Any) -> None:
        self.by_id[i].update(values)

    def add_column(self, name: str) -> None:
        for row in self.by_id.values():
            row[name] = None

    def sorted(self) -> list[dict[str, Any]]:
        return [self.by_id[i] for i in sorted(self.by_id)]

    def digest(self) -> str:
        lines = sorted(json.dumps(r, sort_keys=True) for r in self.by_id.values())
        return hashlib.sha1("\n".join(lines).encode()).hexdigest()


def _by_id(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(found, key=lambda r: (r["id"], json.dumps(r, sort_keys=True)))


def check_table(ds: DeltaSpark, path: Path, expected: Rows, step: str) -> list[dict[str, Any]]:
    """Every reader holds the expected rows: deltalake (in a child process, reading while the
    others do), delta-spark and our reader; DESCRIBE HISTORY lists every commit as its commit
    file says (``support.check_history``); then delta-spark appends a row on top, which our
    reader reads back. Returns the history's rows (newest first)."""
    deltalake = start_deltalake_reads([(str(path), None)])
    want = expected.sorted()
    theirs = ds.read(path, want_rows=True)
    assert _by_id(theirs["rows"]) == want, f"{step}: delta-spark read {theirs['rows']}"
    ours = rows(load(path))
    assert _by_id(ours) == want, f"{step}: our reader read {ours}"
    history = check_history(ds, path, step)
    (seen,) = deltalake()
    assert "error" not in seen, f"{step}: deltalake: {seen['error']}"
    assert (seen["rows"], seen["digest"]) == (len(want), expected.digest()), f"{step}: {seen}"
    extra_id = max(9_000, *(i + 1 for i in expected.by_id))
    extra = {**base_row(extra_id), **{k: None for k in want[0] if k not in ("id", "p", "v")}}
    ds.sql(
        f"INSERT INTO {sql_table(path)} VALUES ({', '.join(_literal(v) for v in extra.values())})"
    )
    expected.add(extra)
    after = rows(load(path))
    assert _by_id(after) == expected.sorted(), f"{step}: after delta-spark's further write"
    return history


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    return f"'{value}'" if isinstance(value, str) else str(value)


def commit_info(path: Path, version: int) -> dict[str, Any]:
    with open(path / "_delta_log" / f"{version:020d}.json", encoding="utf-8") as fh:
        for line in fh:
            action = json.loads(line)
            if "commitInfo" in action:
                info: dict[str, Any] = action["commitInfo"]
                return info
    return {}


def operations(path: Path) -> list[str]:
    """Each commit's operation, in version order."""
    versions = sorted(
        int(p.name[:20]) for p in (path / "_delta_log").glob("*.json") if p.name[:20].isdigit()
    )
    return [commit_info(path, v).get("operation", "?") for v in versions]


@dataclass
class JobResult:
    code: int
    doc: dict[str, Any]
    stderr: str
    #: how many times the job stopped at the pause point (a batch retried after a conflict
    #: builds a new transaction and stops there again)
    pauses: int


class PausedOptimize:
    """The OPTIMIZE job, stopped at ``point`` until ``resume``."""

    def __init__(self, path: Path, point: str, work: Path, *args: str) -> None:
        self.marker = work / f"paused-{point.replace(':', '_')}"
        env = {
            **os.environ,
            PAUSE_ENV: point,
            MARKER_ENV: str(self.marker),
            RESUME_ENV: "1",
            "PYTHONPATH": str(REPO / "operator"),
        }
        cmd = [sys.executable, "-m", "txntable.jobs.optimize", str(path), "--executor", "arrow"]
        self.proc = subprocess.Popen(
            [*cmd, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.pauses = 0
        self._wait_paused(point)

    def _wait_paused(self, point: str) -> None:
        deadline = time.monotonic() + 120
        while not self.marker.exists():
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                raise AssertionError(f"the job ended before {point}: {out[-1000:]} {err[-2000:]}")
            assert time.monotonic() < deadline, f"the job never reached {point}"
            time.sleep(0.02)
        self.pauses += 1

    def resume(self) -> JobResult:
        """Let the job go on (past every later stop at the point) and wait for its result."""
        self.marker.unlink()
        deadline = time.monotonic() + 120
        while self.proc.poll() is None:
            if self.marker.exists():  # stopped again: nothing else commits this time
                self.pauses += 1
                self.marker.unlink()
            assert time.monotonic() < deadline, "the job did not finish"
            time.sleep(0.02)
        out, err = self.proc.communicate()
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        assert lines, f"no result line (exit {self.proc.returncode}): {err[-2000:]}"
        return JobResult(self.proc.returncode, json.loads(lines[-1]), err, self.pauses)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@contextmanager
def paused_optimize(path: Path, point: str, work: Path, *args: str) -> Iterator[PausedOptimize]:
    job = PausedOptimize(path, point, work, *args)
    try:
        yield job
    finally:
        job.kill()


class Gate:
    """A directory ``txn_gate(dir, column)`` waits on (``tests/deltaspark/server.py``)."""

    def __init__(self, work: Path) -> None:
        self.dir = work / "gate"
        self.dir.mkdir()

    def call(self, column: str) -> str:
        return f"txn_gate('{self.dir}', {column})"

    def wait_reached(self, pending: Future[dict[str, Any]]) -> None:
        """Until the statement is inside its transaction, blocked at the gate."""
        deadline = time.monotonic() + 120
        while not (self.dir / "reached").exists():
            if pending.done():
                raise AssertionError(f"the statement ended before the gate: {pending.result()}")
            assert time.monotonic() < deadline, "the statement never reached the gate"
            time.sleep(0.02)

    def open(self) -> None:
        (self.dir / "open").touch()


def run_optimize(path: Path, *args: str) -> JobResult:
    """The OPTIMIZE job run to its end, with no pause."""
    cmd = [sys.executable, "-m", "txntable.jobs.optimize", str(path), "--executor", "arrow"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "operator")}
    for name in (PAUSE_ENV, MARKER_ENV, RESUME_ENV):
        env.pop(name, None)
    done = subprocess.run(
        [*cmd, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no result line (exit {done.returncode}): {done.stderr[-2000:]}"
    return JobResult(done.returncode, json.loads(lines[-1]), done.stderr, 0)
