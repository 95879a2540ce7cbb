"""Recent write activity from the newest commits, and the planner deferring partitions by it.

Commits are written by hand with known timestamps (``inCommitTimestamp``, or the file's
modification time set with ``os.utime``), so the window arithmetic is exact.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.support.planner import files_table
from txntable.api.errors import InvalidSpecError
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.commit.conflicts import PendingCommit, WinningCommit, check_conflicts
from txntable.engine.commit.isolation import IsolationLevel
from txntable.engine.errors import ConcurrentDeleteReadException, InvalidArgumentError
from txntable.engine.model.actions import AddFile, CommitInfo, RemoveFile
from txntable.engine.model.predicates import bind
from txntable.engine.model.schema import parse_schema
from txntable.engine.read.activity import RecentActivity, read_recent_activity
from txntable.engine.storage.base import LocalStorage
from txntable.maintenance.optimize import avoidance
from txntable.maintenance.planner import Avoidance, plan_optimize

NOW = 1_800_000_000_000
MIN = 60_000
SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "p", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def add(path: str, p: str | None, size: int = 100, rows: int = 10) -> dict[str, Any]:
    return {
        "add": {
            "path": path,
            "partitionValues": {"p": p},
            "size": size,
            "modificationTime": 0,
            "dataChange": True,
            "stats": json.dumps({"numRecords": rows}),
        }
    }


def remove(
    path: str, p: str | None, size: int | None = 100, with_values: bool = True
) -> dict[str, Any]:
    body: dict[str, Any] = {"path": path, "deletionTimestamp": 0, "dataChange": True}
    if with_values:
        body.update({"partitionValues": {"p": p}, "extendedFileMetadata": True})
    if size is not None:
        body["size"] = size
    return {"remove": body}


class Log:
    """Writes commit files into ``root/_delta_log`` with chosen timestamps."""

    def __init__(self, root: Path, ict: bool = True) -> None:
        self.root = root
        self.ict = ict
        self.version = -1
        (root / "_delta_log").mkdir(parents=True)
        self.commit(
            NOW - 600 * MIN,
            "CREATE TABLE",
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {
                "metaData": {
                    "id": "t",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": SCHEMA,
                    "partitionColumns": ["p"],
                    "configuration": {},
                }
            },
        )

    def commit(self, ts: int, operation: str, *actions: dict[str, Any]) -> int:
        self.version += 1
        info: dict[str, Any] = {"timestamp": ts, "operation": operation}
        if self.ict:
            info["inCommitTimestamp"] = ts
        lines = [json.dumps({"commitInfo": info}), *(json.dumps(a) for a in actions)]
        path = self.root / "_delta_log" / f"{self.version:020d}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, ns=(ts * 1_000_000, ts * 1_000_000))
        return self.version


def activity(log: Log, window_min: float, **kw: Any) -> RecentActivity:
    return read_recent_activity(
        LocalStorage(str(log.root)),
        log.version,
        int(window_min * MIN),
        partition_columns=["p"],
        now_ms=NOW,
        **kw,
    )


@pytest.mark.parametrize("ict", [True, False])
def test_counts_per_partition_within_the_window(tmp_path: Path, ict: bool) -> None:
    log = Log(tmp_path, ict=ict)
    log.commit(NOW - 30 * MIN, "WRITE", add("old", "a"))  # outside a 10-minute window
    log.commit(NOW - 9 * MIN, "WRITE", add("a1", "a", 100, 5), add("b1", "b", 200, 7))
    log.commit(NOW - 5 * MIN, "DELETE", remove("a1", "a", 100), add("a2", "a", 60, 3))
    log.commit(NOW - 1 * MIN, "WRITE", add("b2", "b", 50, 1))
    act = activity(log, 10)
    assert act.commits == 3 and act.complete
    assert (act.newest_version, act.oldest_version) == (4, 2)
    a, b = act.partitions[("a",)], act.partitions[("b",)]
    assert (a.commits, a.removing_commits, a.files_added, a.files_removed) == (2, 1, 2, 1)
    assert (a.bytes_added, a.bytes_removed, a.rows_added) == (160, 100, 8)
    assert a.last_write_ms == NOW - 5 * MIN and a.last_remove_ms == NOW - 5 * MIN
    assert a.operations == {"WRITE", "DELETE"} and a.removing_operations == {"DELETE"}
    assert (b.commits, b.removing_commits, b.rows_added, b.last_remove_ms) == (2, 0, 8, None)
    assert act.written_since(act.since_ms, removes_only=True) == {("a",): NOW - 5 * MIN}
    assert set(act.written_since(act.since_ms, removes_only=False)) == {("a",), ("b",)}
    assert act.written_since(NOW - 2 * MIN, removes_only=False) == {("b",): NOW - MIN}
    assert act.to_json()["partitions"][0]["partitionValues"] == {"p": "a"}


def test_stops_at_the_first_commit_older_than_the_window(tmp_path: Path) -> None:
    """Newest first: the reader never parses a commit past the first old one (proved by a
    corrupt old commit that would fail to parse)."""
    log = Log(tmp_path)
    log.commit(NOW - 60 * MIN, "WRITE", add("x", "a"))
    (tmp_path / "_delta_log" / f"{log.version:020d}.json").write_text("not json\n")
    os.utime(tmp_path / "_delta_log" / f"{log.version:020d}.json", ns=(0, 0))
    log.commit(NOW - 40 * MIN, "WRITE", add("y", "a"))  # older than the window: stops here
    log.commit(NOW - MIN, "WRITE", add("z", "b"))
    act = activity(log, 10)
    assert act.commits == 1 and act.complete and list(act.partitions) == [("b",)]


def test_bounded_by_max_commits(tmp_path: Path) -> None:
    log = Log(tmp_path)
    for i in range(10):
        log.commit(NOW - (10 - i) * 1000, "MERGE", remove(f"f{i}", "hot"), add(f"g{i}", "hot"))
    act = activity(log, 60, max_commits=4)
    assert act.commits == 4 and not act.complete
    assert (act.newest_version, act.oldest_version) == (10, 7)
    assert act.partitions[("hot",)].removing_commits == 4
    plan = plan_optimize(_three_partitions(), ["p"], OptimizeOptions(), avoid=avoidance(act))
    assert any("newest 4 commit(s) only" in n for n in plan.notes)
    assert activity(log, 60).complete  # reached version 0


def test_table_wide_changes_nulls_and_removes_without_values(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.commit(
        NOW - MIN,
        "SET TBLPROPERTIES",
        {
            "metaData": {
                "id": "t",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": SCHEMA,
                "partitionColumns": ["p"],
                "configuration": {"x": "y"},
            }
        },
    )
    log.commit(NOW - MIN, "DELETE", remove("n1", None), remove("q", "a", with_values=False))
    log.commit(NOW - MIN, "WRITE", {"add": {**add("e", "")["add"]}})
    act = activity(log, 5)
    assert [c.operation for c in act.table_wide] == ["SET TBLPROPERTIES"]
    assert act.removes_without_partition == 1
    # a null partition value and an empty string are the same partition (PROTOCOL.md)
    assert act.partitions[(None,)].commits == 2 and act.partitions[(None,)].removing_commits == 1


def test_rearrangements_are_not_writes(tmp_path: Path) -> None:
    """An OPTIMIZE's dataChange=false commit changes no rows: counting it as a write would make
    every avoiding run defer what the previous run compacted."""
    log = Log(tmp_path)
    compacted = [remove("c/1", "c"), remove("c/2", "c"), add("c/3", "c", 200)]
    for action in compacted:
        next(iter(action.values()))["dataChange"] = False
    log.commit(NOW - MIN, "OPTIMIZE", *compacted)
    act = activity(log, 5)
    c = act.partitions[("c",)]
    assert (c.commits, c.removing_commits, c.rearranging_commits) == (0, 0, 1)
    assert act.written_since(act.since_ms, removes_only=False) == {}
    assert act.to_json()["partitions"][0]["rearrangingCommits"] == 1


def test_commits_after_the_given_version_and_future_dated_ones_count(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.commit(NOW - MIN, "DELETE", remove("a", "a"))
    known = log.version
    log.commit(NOW + 5000, "DELETE", remove("b", "b"))  # a writer whose clock runs ahead
    act = read_recent_activity(
        LocalStorage(str(tmp_path)), known, 5 * MIN, partition_columns=["p"], now_ms=NOW
    )
    assert set(act.partitions) == {("a",), ("b",)}


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    log = Log(tmp_path)
    with pytest.raises(InvalidArgumentError, match="window"):
        activity(log, -1)
    with pytest.raises(InvalidArgumentError, match="max_commits"):
        activity(log, 1, max_commits=0)
    with pytest.raises(InvalidSpecError, match="avoidRecentWritesMs: must be at least 1"):
        OptimizeOptions(avoid_recent_writes_ms=0)
    with pytest.raises(InvalidSpecError, match="removes, any"):
        OptimizeOptions(avoid_writes="deletes")


def _three_partitions() -> pa.Table:
    return files_table(
        [{"path": f"{p}/{i}", "size": 10, "part": {"p": p}} for p in "abc" for i in range(3)]
    )


def test_planner_defers_recently_rewritten_partitions(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.commit(NOW - 3 * MIN, "DELETE", remove("a/old", "a"), add("a/0", "a"))
    log.commit(NOW - 2 * MIN, "WRITE", add("b/0", "b"))  # an append: no conflict, not avoided
    act = activity(log, 10)
    policy = OptimizeOptions(avoid_recent_writes_ms=10 * MIN)
    plan = plan_optimize(_three_partitions(), ["p"], policy, avoid=avoidance(act))
    assert [b.partition_values["p"] for b in plan.bins] == ["b", "c"]
    (deferred,) = plan.deferred_partitions
    assert deferred.partition_values == {"p": "a"} and (deferred.bins, deferred.bytes) == (1, 30)
    assert deferred.reason == "1 commit(s) removed files here in the window (DELETE), last 180s ago"
    doc = plan.to_json()
    assert doc["deferredPartitions"][0]["lastWriteMs"] == NOW - 3 * MIN
    assert doc["recentActivity"]["commitsRead"] == 2
    assert any("1 partition(s) deferred" in n for n in doc["notes"])
    # "any": the appended partition is avoided too
    plan_any = plan_optimize(_three_partitions(), ["p"], policy, avoid=avoidance(act, "any"))
    assert [b.partition_values["p"] for b in plan_any.bins] == ["c"]
    # a shorter window no longer sees the DELETE
    plan_short = plan_optimize(
        _three_partitions(), ["p"], policy, avoid=avoidance(activity(log, 1))
    )
    assert len(plan_short.bins) == 3 and plan_short.deferred_partitions == ()


def test_planner_without_avoidance_is_unchanged() -> None:
    plan = plan_optimize(_three_partitions(), ["p"], OptimizeOptions())
    hot = Avoidance({("zzz",): ("busy", None)})  # a partition without work is not "deferred"
    avoided = plan_optimize(_three_partitions(), ["p"], OptimizeOptions(), avoid=hot)
    assert plan.bins == avoided.bins and avoided.deferred_partitions == ()
    assert plan.to_json()["recentActivity"] is None


def test_which_writes_really_cost_an_optimize() -> None:
    """The claim the docs make, checked against the conflict checker: an OPTIMIZE (dataChange
    false, hence SnapshotIsolation) that read partition a's files conflicts with a commit that
    removes one of them, never with appends, even into partition a."""
    fields = parse_schema(SCHEMA)
    pending = PendingCommit(
        actions=[RemoveFile(path="a/0", data_change=False), AddFile(path="a/new", size=1)],
        isolation_level=IsolationLevel.SNAPSHOT_ISOLATION,
        read_predicates=[bind("p = 'a'", fields, ["p"])],
        read_files=frozenset({"a/0", "a/1"}),
    )
    append = WinningCommit(
        5,
        [CommitInfo({"operation": "WRITE"}), AddFile(path="a/9", partition_values={"p": "a"})],
    )
    check_conflicts(pending, append)  # no conflict
    elsewhere = WinningCommit(
        6,
        [CommitInfo({"operation": "DELETE"}), RemoveFile(path="b/0", partition_values={"p": "b"})],
    )
    check_conflicts(pending, elsewhere)  # no conflict
    rewrite = WinningCommit(
        7,
        [CommitInfo({"operation": "DELETE"}), RemoveFile(path="a/1", partition_values={"p": "a"})],
    )
    with pytest.raises(ConcurrentDeleteReadException):
        check_conflicts(pending, rewrite)
