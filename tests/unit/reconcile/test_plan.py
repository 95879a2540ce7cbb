"""The controller's plan (``reconcile.plan``) against the real planner, on real tables.

Tables are written through txntable's own ``Table`` API with files of many sizes (including a
null partition and partitions with too few small files); the summary the controller keeps is
loaded from the log, and per partition the plan's bins, files and bytes must equal what
``maintenance.optimize.plan`` (the run's planner on a full snapshot) decides. ``plan_id`` must
stay when a commit leaves the work as it was and change when the work changes; what the summary
cannot decide (deletion vectors, Z-order, clustering) is flagged as an estimate.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from txntable.api.optimize_options import OptimizeOptions
from txntable.engine import Table
from txntable.engine.read.summary import TableSummary
from txntable.maintenance.clustering import CLUSTERING_DOMAIN
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize
from txntable.maintenance.optimize import plan as real_plan
from txntable.reconcile.plan import CompactionPlan, RunRate, learn_rate, plan_from_summary

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("pad", pa.string())])


def _rows(rng: random.Random, start: int, n: int, part: str | None) -> pa.Table:
    pads = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 40))) for _ in range(n)]
    return pa.table({"id": range(start, start + n), "p": [part] * n, "pad": pads}, SCHEMA)


def _write(path: Path, parts: list[str | None], commits: int, seed: int) -> Table:
    """A table of ``commits`` appends of 1 to 300 rows each into random ``parts``."""
    rng = random.Random(seed)
    table = Table.create(str(path), SCHEMA, ["p"] if parts != [None] or seed % 2 else [])
    start = 0
    for _ in range(commits):
        n = rng.choice([1, 3, 20, 80, 300])
        table.append(_rows(rng, start, n, rng.choice(parts)))
        start += n
    return table


@dataclass(frozen=True)
class Case:
    parts: list[str | None]
    commits: int
    policy: OptimizeOptions
    seed: int = 0


CASES = {
    "unpartitioned": Case([None], 30, OptimizeOptions(target_file_size=6_000), seed=2),
    "partitions-with-null": Case(
        ["a", "b", "c", None], 40, OptimizeOptions(target_file_size=5_000), seed=1
    ),
    "min-size-below-target": Case(
        ["a", "b"], 30, OptimizeOptions(target_file_size=8_000, min_file_size=2_500), seed=3
    ),
    "min-input-files-4": Case(
        ["a", "b", "c", "d", "e"], 25, OptimizeOptions(target_file_size=5_000, min_input_files=4)
    ),
    "max-bytes-defers-bins": Case(
        ["a", "b", "c"],
        40,
        OptimizeOptions(target_file_size=4_000, max_bytes_per_run=9_000),
        seed=4,
    ),
    "where-on-partition": Case(
        ["a", "b", "c"], 30, OptimizeOptions(target_file_size=5_000, where="p IN ('a', 'c')")
    ),
    "few-files-default-policy": Case(["a", "b", "c", "d"], 4, OptimizeOptions(), seed=5),
    "max-files-per-bin-3": Case(
        ["a", "b", None], 40, OptimizeOptions(target_file_size=50_000, max_files_per_bin=3), seed=6
    ),
}


def _per_partition(plan: CompactionPlan) -> dict[tuple[str | None, ...], tuple[int, int, int]]:
    return {tuple(v for _, v in w.values): (w.bins, w.files, w.bytes) for w in plan.partitions}


def _real_per_partition(table: Table, policy: OptimizeOptions) -> dict:
    found: dict[tuple[str | None, ...], list[int]] = {}
    for b in real_plan(table, policy).bins:
        key = tuple(b.partition_values.values())
        figures = found.setdefault(key, [0, 0, 0])
        figures[0] += 1
        figures[1] += len(b.paths)
        figures[2] += b.total_bytes
    return {k: tuple(v) for k, v in found.items()}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_plan_equals_the_real_planner_per_partition(tmp_path: Path, case: Case) -> None:
    table = _write(tmp_path / "t", case.parts, case.commits, case.seed)
    summary = TableSummary.load(table.storage)
    ours = plan_from_summary(summary, case.policy)
    theirs = real_plan(table, case.policy)
    assert _per_partition(ours) == _real_per_partition(table, case.policy)
    assert (ours.bins, ours.input_files, ours.input_bytes) == (
        len(theirs.bins),
        theirs.input_files,
        theirs.input_bytes,
    )
    assert ours.largest_bin_bytes == max((b.total_bytes for b in theirs.bins), default=0)
    assert (ours.deferred_bins, ours.deferred_bytes) == (
        len(theirs.deferred),
        sum(b.total_bytes for b in theirs.deferred),
    )
    assert ours.exact, ours.notes
    assert ours.version == theirs.read_version


def test_the_generated_tables_have_bins_deferred_bins_and_skipped_partitions(
    tmp_path: Path,
) -> None:
    case = CASES["max-bytes-defers-bins"]
    table = _write(tmp_path / "t", case.parts, case.commits, case.seed)
    plan = plan_from_summary(TableSummary.load(table.storage), case.policy)
    assert plan.bins >= 1 and plan.deferred_bins >= 1
    assert any(n.startswith(f"{plan.deferred_bins} bin(s) left") for n in plan.notes)
    few = CASES["min-input-files-4"]
    table = _write(tmp_path / "u", few.parts, few.commits, few.seed)
    plan = plan_from_summary(TableSummary.load(table.storage), few.policy)
    assert 0 < len(plan.partitions) < len(few.parts)


def _appended(table: Table, part: str, rows: int, seed: int) -> None:
    table.append(_rows(random.Random(seed), 10_000_000 + seed * 10_000, rows, part))


def test_plan_id_stays_across_a_commit_to_a_compacted_partition(tmp_path: Path) -> None:
    policy = OptimizeOptions(target_file_size=5_000)
    table = _write(tmp_path / "t", ["a", "b"], 20, seed=6)
    optimize(table, OptimizeOptions(target_file_size=1 << 20, where="p = 'a'"), ArrowExecutor(1))
    before = plan_from_summary(TableSummary.load(table.storage), policy)
    assert ("a",) not in _per_partition(before) and before.bins >= 1
    _appended(table, "a", 600, seed=1)  # one file above the minimum size: no new work
    after = plan_from_summary(TableSummary.load(table.storage), policy)
    assert after.version == before.version + 1
    assert after.plan_id == before.plan_id
    _appended(table, "a", 2, seed=2)  # two small files in "a": a new bin
    _appended(table, "a", 3, seed=3)
    changed = plan_from_summary(TableSummary.load(table.storage), policy)
    assert ("a",) in _per_partition(changed)
    assert changed.plan_id != before.plan_id


def test_plan_id_changes_with_the_policy_and_the_vacuum_figures(tmp_path: Path) -> None:
    table = _write(tmp_path / "t", ["a", "b"], 20, seed=7)
    summary = TableSummary.load(table.storage)
    small = plan_from_summary(summary, OptimizeOptions(target_file_size=3_000))
    large = plan_from_summary(summary, OptimizeOptions(target_file_size=50_000))
    assert small.plan_id != large.plan_id
    assert plan_from_summary(summary, OptimizeOptions(target_file_size=3_000)).plan_id == (
        small.plan_id
    )
    table.delete("p = 'b'")
    deleted = TableSummary.load(table.storage)
    far = 10**15  # every tombstone is past the retention
    swept = plan_from_summary(deleted, OptimizeOptions(), vacuum=True, now_ms=far)
    unswept = plan_from_summary(deleted, OptimizeOptions())
    assert swept.vacuum is not None and swept.vacuum.files > 0 and swept.vacuum.bytes > 0
    assert unswept.vacuum is None
    assert swept.plan_id != unswept.plan_id


def _dv_table(path: Path) -> Table:
    table = Table.create(str(path), SCHEMA, ["p"], {"delta.enableDeletionVectors": "true"})
    rng = random.Random(0)
    for i in range(6):
        table.append(_rows(rng, i * 100, 100, "a"))
    table.delete("id IN (1, 101, 201, 301, 450, 451)")
    return table


def _clustered_table(path: Path) -> Table:
    table = Table.create(str(path), SCHEMA)
    actions = [
        {"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "CLUSTER BY"}},
        {
            "protocol": {
                "minReaderVersion": 1,
                "minWriterVersion": 7,
                "writerFeatures": ["domainMetadata", "clustering"],
            }
        },
        {
            "domainMetadata": {
                "domain": CLUSTERING_DOMAIN,
                "configuration": json.dumps({"clusteringColumns": [["id"]]}),
                "removed": False,
            }
        },
    ]
    log = path / "_delta_log" / f"{1:020d}.json"
    log.write_text("\n".join(json.dumps(a) for a in actions) + "\n", encoding="utf-8")
    rng = random.Random(1)
    for i in range(5):
        table.append(_rows(rng, i * 50, 50, None))
    return table


ESTIMATES: dict[str, tuple[Callable[[Path], Table], OptimizeOptions, str]] = {
    "deletion-vectors": (_dv_table, OptimizeOptions(), "deletion vectors"),
    "z-order": (
        lambda p: _write(p, ["a", "b"], 12, seed=8),
        OptimizeOptions(z_order_by=("id",)),
        "Z-order",
    ),
    "clustered": (_clustered_table, OptimizeOptions(), "clustered table"),
    "avoid-recent-writes": (
        lambda p: _write(p, ["a", "b"], 12, seed=9),
        OptimizeOptions(avoid_recent_writes_ms=60_000),
        "may be deferred",
    ),
}


@pytest.mark.parametrize("name", list(ESTIMATES), ids=list(ESTIMATES))
def test_what_the_summary_cannot_decide_is_an_estimate(tmp_path: Path, name: str) -> None:
    make, policy, words = ESTIMATES[name]
    table = make(tmp_path / "t")
    plan = plan_from_summary(TableSummary.load(table.storage), policy)
    assert not plan.exact
    assert any(words in note for note in plan.notes), plan.notes
    theirs = real_plan(table, policy)
    # the estimate never plans less than the run: bins are a lower bound only under vectors
    if name == "deletion-vectors":
        assert plan.files_with_deletion_vectors > 0
        assert plan.input_files <= theirs.input_files + plan.files_with_deletion_vectors
    else:
        assert plan.input_files >= theirs.input_files


def test_an_exact_plan_has_no_estimate_note(tmp_path: Path) -> None:
    table = _write(tmp_path / "t", ["a"], 8, seed=10)
    plan = plan_from_summary(TableSummary.load(table.storage), OptimizeOptions())
    assert plan.exact and plan.notes == ()


@pytest.mark.parametrize(
    ("runs", "known", "expected"),
    [
        ([], None, None),
        ([(0, 5.0), (100, 0.0)], RunRate(7, 1), RunRate(7, 1)),
        ([(1_000, 2.0), (3_000, 2.0)], None, RunRate(1_000, 2)),
        ([(600, 1.0)] * 8, None, RunRate(600, 5)),
    ],
    ids=["none", "unusable-keeps-known", "two-runs", "newest-five"],
)
def test_learn_rate(
    runs: list[tuple[int, float]], known: RunRate | None, expected: RunRate | None
) -> None:
    assert learn_rate(runs, known) == expected


def test_estimated_seconds_from_the_rate(tmp_path: Path) -> None:
    table = _write(tmp_path / "t", ["a"], 10, seed=11)
    summary = TableSummary.load(table.storage)
    plan = plan_from_summary(summary, OptimizeOptions(), rate=RunRate(1_000, 3))
    assert plan.input_bytes > 0
    assert plan.estimated_seconds == -(-plan.input_bytes // 1_000)
    assert plan_from_summary(summary, OptimizeOptions()).estimated_seconds is None
