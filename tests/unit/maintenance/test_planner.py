"""The OPTIMIZE planner: bins per partition, skips, limits, determinism, dry-run view."""

from __future__ import annotations

import json
import random

import pytest

from tests.support.planner import MB, files_table
from tests.unit.case_ids import readable
from txntable.api.errors import InvalidSpecError
from txntable.api.optimize_options import OptimizeOptions
from txntable.maintenance.planner import ZORDER_TAG, missing_row_counts, plan_optimize


def sizes(*mb: float, part: dict | None = None, prefix: str = "f") -> list[dict]:
    return [
        {"path": f"{prefix}{i:03d}.parquet", "size": int(m * MB), "part": part}
        for i, m in enumerate(mb)
    ]


POLICY = OptimizeOptions(target_file_size=10 * MB)

# (name, files, policy, expected bins as sorted lists of sizes in MB)
CASES = [
    ("empty table", [], POLICY, []),
    ("one small file is already compacted", sizes(1), POLICY, []),
    ("two small files make one bin", sizes(1, 2), POLICY, [[1, 2]]),
    ("files at or over min size are not candidates", sizes(1, 10, 12), POLICY, []),
    ("first-fit decreasing packs to the target", sizes(6, 5, 4, 3, 2), POLICY, [[2, 3, 5], [4, 6]]),
    ("a lone leftover file is not a bin", sizes(9, 9, 9), POLICY, []),
    (
        "min input files drops small bins",
        sizes(6, 4, 5, 5, 1, 1, 1),
        OptimizeOptions(target_file_size=10 * MB, min_input_files=3),
        [[1, 1, 1]],
    ),
    (
        "explicit min file size below the target",
        sizes(1, 2, 3, 4),
        OptimizeOptions(target_file_size=10 * MB, min_file_size=3 * MB),
        [[1, 2]],
    ),
    (
        "max bytes defers later bins but always runs one",
        sizes(6, 4, 6, 4, 6, 4),
        OptimizeOptions(target_file_size=10 * MB, max_bytes_per_run=5 * MB),
        [[4, 6]],
    ),
]


def _bin_sizes(plan) -> list[list[float]]:
    return [sorted(round(s / MB) for s in b.sizes) for b in plan.bins]


@pytest.mark.parametrize(("name", "rows", "policy", "expected"), CASES, ids=[c[0] for c in CASES])
def test_bins(name, rows, policy, expected):
    plan = plan_optimize(files_table(rows), [], policy, read_version=3)
    assert sorted(_bin_sizes(plan)) == sorted(expected)
    for b in plan.bins:
        assert b.total_bytes <= policy.target_file_size or len(b.paths) == 1
        assert list(b.paths) == sorted(b.paths)


def test_partitions_are_planned_separately_and_in_order():
    rows = (
        sizes(1, 1, part={"d": "b"}, prefix="b/")
        + sizes(1, 1, part={"d": "a"}, prefix="a/")
        + sizes(1, 1, part={"d": None}, prefix="n/")
        + sizes(1, part={"d": "c"}, prefix="c/")
        + [
            {"path": "e/x", "size": MB, "part": {"d": ""}},
            {"path": "e/y", "size": MB, "part": {"d": None}},
        ]
    )
    plan = plan_optimize(files_table(rows), ["d"], POLICY, read_version=7)
    assert [b.partition_values for b in plan.bins] == [{"d": None}, {"d": "a"}, {"d": "b"}]
    # "" and null are the same (null) partition
    assert plan.bins[0].paths == ("e/x", "e/y", "n/000.parquet", "n/001.parquet")
    assert plan.partitions_considered == 4 and plan.partitions_skipped == 1
    assert all(p.startswith("a/") for p in plan.bins[1].paths)
    assert all(p.startswith("b/") for p in plan.bins[2].paths)


def test_deterministic_for_shuffled_inputs():
    rng = random.Random(5)
    rows = []
    for part in ("x", "y", "z"):
        rows += sizes(*[rng.randint(1, 9) for _ in range(40)], part={"p": part}, prefix=part)
    plans = []
    for seed in range(3):
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        plans.append(plan_optimize(files_table(shuffled), ["p"], POLICY, 1).to_json())
    assert plans[0] == plans[1] == plans[2]
    assert plans[0]["numBins"] > 3
    planned = [p for b in plans[0]["bins"] for p in b["files"]]
    assert len(planned) == len(set(planned))


def test_files_with_deletion_vectors_are_candidates_and_carry_their_vector():
    rows = sizes(1, 1, 1)
    rows[0]["dv"] = 1
    plan = plan_optimize(files_table(rows), [], POLICY)
    assert [len(b.paths) for b in plan.bins] == [3]
    (b,) = plan.bins
    dvs = dict(zip(b.paths, b.deletion_vectors, strict=True))
    assert dvs[rows[0]["path"]]["cardinality"] == 1
    assert all(dvs[r["path"]] is None for r in rows[1:])
    assert plan.files_with_deletion_vectors == 1 and plan.notes


@pytest.mark.parametrize(
    ("deleted", "rewritten"),
    [pytest.param(49, False, id="below-5-percent"), pytest.param(50, True, id="at-5-percent")],
)
def test_a_large_file_is_purged_alone_once_its_vector_hides_enough_rows(
    deleted: int, rewritten: bool
) -> None:
    rows = sizes(2000)  # far above the target: never a size candidate
    rows[0]["dv"] = deleted
    rows[0]["stats"] = '{"numRecords": 1000}'
    plan = plan_optimize(files_table(rows), [], POLICY)
    assert [b.paths for b in plan.bins] == ([(rows[0]["path"],)] if rewritten else [])


@pytest.mark.parametrize(
    "stats", [None, '{"minValues": {"id": 0}, "tightBounds": false}'], ids=["no-stats", "no-count"]
)
def test_a_file_without_num_records_is_purged_by_its_footer_count(stats: str | None) -> None:
    """Issue 33.3: the count the caller read from the file's footer stands in for numRecords;
    the statistics' own count wins where there is one, and the plan says how many it used."""
    rows = sizes(2000, 2000)
    rows[0].update(dv=50, stats=stats)
    rows[1].update(dv=50, stats='{"numRecords": 2000}')  # 2.5%: stays
    files = files_table(rows)
    assert missing_row_counts(files) == [rows[0]["path"]]
    assert plan_optimize(files, [], POLICY).bins == ()  # no count: never purged (as before)
    counts = {rows[0]["path"]: 1000, rows[1]["path"]: 10}
    plan = plan_optimize(files, [], POLICY, row_counts=counts)
    assert [b.paths for b in plan.bins] == [(rows[0]["path"],)]
    assert plan.to_json()["rowCountsFromFooters"] == 2
    assert any("counted from their Parquet footers" in n for n in plan.notes)


def test_zorder_takes_the_whole_partition_until_tagged():
    policy = OptimizeOptions(target_file_size=10 * MB, z_order_by=("a", "b"))
    rows = sizes(1, 20, 3)  # the big file is included: the rows are re-clustered
    plan = plan_optimize(files_table(rows), [], policy)
    assert len(plan.bins) == 1 and plan.bins[0].zorder and len(plan.bins[0].paths) == 3
    tag = json.dumps(["a", "b"], separators=(",", ":"))
    tagged = [dict(r, tags={ZORDER_TAG: tag}) for r in rows]
    assert plan_optimize(files_table(tagged), [], policy).bins == ()
    other = OptimizeOptions(target_file_size=10 * MB, z_order_by=("b",))
    assert len(plan_optimize(files_table(tagged), [], other).bins) == 1


def test_batches_cut_by_bytes():
    policy = OptimizeOptions(target_file_size=10 * MB, partial_commit_size=15 * MB)
    rows = sizes(5, 5, 5, 5, 5, 5, 5, 5)  # four bins of 10 MB
    plan = plan_optimize(files_table(rows), [], policy)
    assert [len(batch) for batch in plan.batches()] == [1, 1, 1, 1]
    big = OptimizeOptions(target_file_size=10 * MB, partial_commit_size=25 * MB)
    assert [len(b) for b in plan_optimize(files_table(rows), [], big).batches()] == [2, 2]


def test_dry_run_json_is_serialisable():
    plan = plan_optimize(files_table(sizes(1, 2)), [], POLICY, read_version=4)
    doc = json.loads(json.dumps(plan.to_json()))
    assert doc["readVersion"] == 4 and doc["numBins"] == 1 and doc["numInputBytes"] == 3 * MB
    assert doc["bins"][0]["binId"] == plan.bins[0].bin_id


@pytest.mark.parametrize(
    "kwargs",
    [
        {"target_file_size": 0},
        {"min_input_files": 1},
        {"max_bytes_per_run": 0},
        {"z_order_by": ("a", "a")},
        {"min_file_size": -1},
        {"partial_commit_size": 0},
    ],
    ids=readable,
)
def test_bad_policies(kwargs):
    with pytest.raises(InvalidSpecError):
        OptimizeOptions(**kwargs)
