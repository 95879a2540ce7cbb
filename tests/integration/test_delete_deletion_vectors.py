"""DELETE through deletion vectors: rows are marked, files stay, deltalake reads what is left.

deltalake (QueryBuilder, which applies deletion vectors, in a child process) is the oracle; the
engine's ``row_deletes.live_rows`` must agree with it. Tables are local so both read the same
files.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests import oracle_read
from tests.faults import FAIL_BEFORE, FaultyStorage
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.commit import row_tracking as rt
from txntable.engine.commit.transaction import CommitOptions
from txntable.engine.errors import (
    ConcurrentModificationException,
    InvalidArgumentError,
    InvalidCommitError,
    StorageError,
)
from txntable.engine.model.deletion_vectors import deleted_rows, dv_file
from txntable.engine.storage.factory import open_storage
from txntable.engine.table import Table
from txntable.engine.vacuum import vacuum
from txntable.engine.write import api as write_api
from txntable.engine.write import row_deletes
from txntable.engine.write.row_deletes import live_rows
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string()), ("p", pa.string())])
DV = {"delta.enableDeletionVectors": "true"}


def _data(ids: range, part: str) -> pa.Table:
    return pa.table(
        {"id": list(ids), "s": [f"s{i % 7}" for i in ids], "p": [part] * len(ids)}, schema=SCHEMA
    )


def _digest(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``oracle_read.read`` reports for these rows."""
    lines = sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)
    return {"rows": len(lines), "digest": hashlib.sha1("\n".join(lines).encode()).hexdigest()}


def _oracle(path: Path, version: int | None = None) -> dict[str, Any]:
    found = oracle_read.read(path, version)
    return {"rows": found["rows"], "digest": found["digest"]}


def _ids(table: Table) -> list[int]:
    return sorted(live_rows(table.snapshot()).column("id").to_pylist())


def _log(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def _metrics(path: Path, version: int) -> dict[str, str]:
    info = next(a["commitInfo"] for a in _log(path, version) if "commitInfo" in a)
    assert info["operation"] == "DELETE"
    metrics: dict[str, str] = info["operationMetrics"]
    return metrics


def _dv_files(path: Path) -> set[str]:
    return {p.name for p in path.glob("deletion_vector_*.bin")}


def _parquet(path: Path) -> set[str]:
    return {
        str(p.relative_to(path)) for p in path.rglob("*.parquet") if "_delta_log" not in p.parts
    }


def _table(path: Path, **properties: str) -> Table:
    table = Table.create(str(path), SCHEMA, partition_by=["p"], properties={**DV, **properties})
    table.append(pa.concat_tables([_data(range(0, 50), "a"), _data(range(50, 100), "b")]))
    table.append(_data(range(100, 130), "a"))
    return table


def test_create_with_deletion_vectors_gets_the_feature(tmp_path: Path) -> None:
    protocol = Table.create(str(tmp_path / "t"), SCHEMA, properties=DV).snapshot().protocol
    assert (protocol.min_reader_version, protocol.min_writer_version) == (3, 7)
    assert protocol.reader_features == ["deletionVectors"]
    assert protocol.writer_features == ["appendOnly", "invariants", "deletionVectors"]


def test_delete_marks_rows_in_vectors_and_deltalake_reads_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path)
    files = _parquet(path)
    everything = live_rows(table.snapshot())
    predicate = "(id >= 10 AND id < 20) OR s = 's3' OR (p = 'b' AND id > 95)"
    result = table.delete(predicate)
    assert result is not None and result.operation == "DELETE"
    expected = everything.filter(
        pc.invert(
            pc.or_(
                pc.or_(
                    pc.and_(pc.greater_equal(everything["id"], 10), pc.less(everything["id"], 20)),
                    pc.equal(everything["s"], "s3"),
                ),
                pc.and_(pc.equal(everything["p"], "b"), pc.greater(everything["id"], 95)),
            )
        )
    )
    assert _parquet(path) == files  # no data file was written or rewritten
    assert len(_dv_files(path)) == 1  # one vector file for the whole commit
    assert _oracle(path) == _digest(expected.to_pylist())
    assert _digest(live_rows(table.snapshot()).to_pylist()) == _digest(expected.to_pylist())
    lines = _log(path, result.version)
    adds = [a["add"] for a in lines if "add" in a]
    removes = [a["remove"] for a in lines if "remove" in a]
    assert sorted(a["path"] for a in adds) == sorted(r["path"] for r in removes)  # same paths
    assert len(adds) == 3 and all(a["dataChange"] for a in adds)
    for add in adds:
        dv = add["deletionVector"]
        assert dv["storageType"] == "u" and len(dv["pathOrInlineDv"]) == 20
        stats = json.loads(add["stats"])
        assert stats["tightBounds"] is False and stats["numRecords"] in (50, 30)
    metrics = _metrics(path, result.version)
    assert metrics["numDeletedRows"] == str(everything.num_rows - expected.num_rows)
    assert metrics["numDeletionVectorsAdded"] == "3" and metrics["numRemovedFiles"] == "0"
    # the version before the delete still reads whole
    assert _oracle(path, result.version - 1) == _digest(everything.to_pylist())


def test_deletes_on_the_same_file_union_their_vectors_and_optimize_purges(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t"
    table = _table(path)
    first = table.delete("id < 5")
    second = table.delete("id < 8 OR id = 40")
    assert first is not None and second is not None
    assert _metrics(path, second.version)["numDeletedRows"] == "4"  # 5, 6, 7, 40
    assert _metrics(path, second.version)["numDeletionVectorsUpdated"] == "1"
    add = next(a["add"] for a in _log(path, second.version) if "add" in a)
    remove = next(a["remove"] for a in _log(path, second.version) if "remove" in a)
    assert remove["deletionVector"] == next(
        a["add"]["deletionVector"] for a in _log(path, first.version) if "add" in a
    )  # the remove names the logical file it replaces: path and old vector
    assert add["deletionVector"]["cardinality"] == 9
    assert deleted_rows(table.storage, add["deletionVector"]) == [0, 1, 2, 3, 4, 5, 6, 7, 40]
    expected = [i for i in range(130) if i >= 8 and i != 40]
    assert _ids(table) == expected
    before = _oracle(path)
    assert before["rows"] == len(expected)
    assert table.delete("id < 8") is None  # those rows are gone already: nothing to commit
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.bins_committed >= 1
    files = Table.open(str(path)).snapshot().files()
    assert files.column("deletionVector").null_count == files.num_rows  # purged
    assert _oracle(path) == before
    assert _ids(Table.open(str(path))) == expected


def test_a_file_left_without_rows_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path)
    table.delete("id >= 100 AND id < 120")
    result = table.delete("id >= 110 OR (p = 'b' AND id = 50)")
    assert result is not None
    lines = _log(path, result.version)
    adds = [a["add"]["path"] for a in lines if "add" in a]
    removes = [a["remove"] for a in lines if "remove" in a]
    assert len(removes) == 2 and len(adds) == 1  # the 100..129 file goes, the p=b one shrinks
    gone = next(r for r in removes if r["path"] not in adds)
    assert gone["deletionVector"]["cardinality"] == 20  # removed with the vector it had
    metrics = _metrics(path, result.version)
    assert (metrics["numRemovedFiles"], metrics["numDeletedRows"]) == ("1", "11")
    expected = [i for i in range(100) if i != 50]
    assert _ids(table) == expected
    assert _oracle(path)["rows"] == len(expected)


def test_a_spark_vector_is_extended_not_replaced(table_copy: Any) -> None:
    """table-with-dv-small: Spark deleted values 0 and 9; deleting 5 keeps both."""
    path = table_copy("table-with-dv-small")
    table = Table.open(str(path))
    assert table.delete("value = 5 OR value = 9") is not None
    add = next(iter(table.snapshot().add_actions()))
    assert add.deletion_vector is not None and add.deletion_vector.cardinality == 3
    assert deleted_rows(table.storage, add.deletion_vector.to_json()) == [0, 5, 9]
    assert _oracle(path) == _digest([{"value": v} for v in (1, 2, 3, 4, 6, 7, 8)])


def test_row_tracking_keeps_row_ids_of_the_rows_left(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, **{rt.ENABLE_KEY: "true"})
    before = {r["id"]: (r[rt.ROW_ID], r[rt.ROW_COMMIT_VERSION])
              for r in rt.stable_row_ids(table.snapshot(), ["id"]).to_pylist()}  # fmt: skip
    live = {a.path: (a.base_row_id, a.default_row_commit_version)
            for a in table.snapshot().add_actions()}  # fmt: skip
    assert table.delete("s = 's1' OR id > 120") is not None
    after = {r["id"]: (r[rt.ROW_ID], r[rt.ROW_COMMIT_VERSION])
             for r in rt.stable_row_ids(table.snapshot(), ["id"]).to_pylist()}  # fmt: skip
    assert after == {i: v for i, v in before.items() if i % 7 != 1 and i <= 120}
    for add in table.snapshot().add_actions():
        assert (add.base_row_id, add.default_row_commit_version) == live[add.path]
    assert _oracle(path)["rows"] == len(after)


def test_a_delete_racing_another_on_the_same_file_is_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other delete wins; ours conflicts (it read the file the winner replaced), deletes the
    vector file it wrote, reads again and unions its rows with the winner's."""
    path = tmp_path / "t"
    _table(path)
    original = write_api._writable_snapshot
    calls: list[int] = []

    def delete_meanwhile(t: Table) -> object:
        snapshot = original(t)
        if not calls:
            calls.append(1)
            Table.open(str(path)).delete("id = 1 OR id = 2")
        return snapshot

    monkeypatch.setattr(write_api, "_writable_snapshot", delete_meanwhile)
    result = Table.open(str(path)).delete("id = 2 OR id = 3")
    assert result is not None and result.version == 4
    assert _metrics(path, 4)["numDeletedRows"] == "1"  # 2 was the winner's
    table = Table.open(str(path))
    assert _ids(table) == [0, *range(4, 130)]
    referenced = {
        dv_file(add.deletion_vector.storage_type, add.deletion_vector.path_or_inline_dv)
        for add in table.snapshot().add_actions()
        if add.deletion_vector
    }
    assert len(referenced) == 1 and referenced <= _dv_files(path)
    assert len(_dv_files(path)) == 2  # the winner's and ours: our first attempt's is gone
    assert _oracle(path)["rows"] == 127


def test_a_delete_that_runs_out_of_retries_leaves_no_vector_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t"
    _table(path)
    original = write_api._writable_snapshot
    monkeypatch.setattr(write_api, "DELETE_CONFLICT_RETRIES", 0)

    def delete_meanwhile(t: Table) -> object:
        snapshot = original(t)
        monkeypatch.setattr(write_api, "_writable_snapshot", original)
        Table.open(str(path)).delete("id = 1")
        return snapshot

    monkeypatch.setattr(write_api, "_writable_snapshot", delete_meanwhile)
    # the winner's re-add of the file matches what we read (ConcurrentAppendException comes first
    # in Delta's order; its remove of a file we read would be ConcurrentDeleteReadException)
    with pytest.raises(ConcurrentModificationException, match="concurrent DELETE"):
        Table.open(str(path)).delete("id = 3", options=CommitOptions(backoff_max_s=0.0))
    assert len(_dv_files(path)) == 1  # the winner's only
    assert Table.open(str(path)).version() == 3


def test_bad_deletes_change_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path)
    with pytest.raises(InvalidArgumentError, match="not a valid long"):
        table.delete("id = 'x'")
    with pytest.raises(InvalidArgumentError, match="not in the table schema"):
        table.delete("nope = 1")
    assert table.delete("id > 1000") is None
    assert table.version() == 2 and _dv_files(path) == set()

    frozen = tmp_path / "append-only"
    table = _table(frozen, **{"delta.appendOnly": "true"})
    with pytest.raises(InvalidCommitError, match="append-only"):
        table.delete("id = 3")
    assert table.version() == 2 and _dv_files(frozen) == set()


def test_tables_without_vectors_keep_partition_deletes(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = Table.create(str(path), SCHEMA, partition_by=["p"])
    table.append(pa.concat_tables([_data(range(0, 5), "a"), _data(range(5, 10), "b")]))
    with pytest.raises(InvalidArgumentError, match=r"delta\.enableDeletionVectors=true"):
        table.delete("id = 3")
    assert table.delete("p = 'a'") is not None
    assert _ids(table) == list(range(5, 10)) and _dv_files(path) == set()
    # a vector table deletes whole partitions the same way: no vector for a partition predicate
    other = _table(tmp_path / "dv")
    result = other.delete("p = 'b'")
    assert result is not None and _dv_files(tmp_path / "dv") == set()
    assert _metrics(tmp_path / "dv", result.version)["numDeletedRows"] == "50"


QUICK = CommitOptions(backoff_initial_s=0.0, backoff_max_s=0.0, sleep=lambda _s: None)


def test_a_vector_file_that_fails_to_write_is_gone_and_nothing_commits(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path)
    storage = FaultyStorage(open_storage(str(path)))
    storage.inject(FAIL_BEFORE, "deletion_vector_*.bin")
    with pytest.raises(StorageError, match="injected failure"):
        Table(storage).delete("id = 3", options=QUICK)
    assert _dv_files(path) == set() and Table.open(str(path)).version() == 2


def test_an_ambiguous_commit_failure_names_the_vector_file_it_kept(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path)
    storage = FaultyStorage(open_storage(str(path)))
    storage.inject(FAIL_BEFORE, "_delta_log/00000000000000000003.json", times=10)
    with pytest.raises(StorageError) as info:
        Table(storage).delete("id = 3", options=QUICK)
    (kept,) = _dv_files(path)
    assert info.value.uncommitted_files == (kept,) and kept in str(info.value)
    assert Table.open(str(path)).version() == 2


def test_files_their_statistics_rule_out_are_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t"
    table = _table(path)  # files: p=a ids 0..49, p=b ids 50..99, p=a ids 100..129
    read: list[str] = []
    original = row_deletes._read

    def spy(snapshot: Any, raw: str, columns: Any) -> Any:
        read.append(raw)
        return original(snapshot, raw, columns)

    monkeypatch.setattr(row_deletes, "_read", spy)
    result = table.delete("id = 120 OR id = 125")
    assert result is not None and len(read) == 1
    touched = next(a["add"]["path"] for a in _log(path, result.version) if "add" in a)
    assert read == [touched]
    assert _ids(table) == [i for i in range(130) if i not in (120, 125)]


def test_vacuum_keeps_the_live_vector_file_and_reclaims_replaced_ones(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path)
    table.delete("id = 1")
    (first,) = _dv_files(path)
    table.delete("id = 2")  # replaces the vector of the same file: the first is a tombstone's
    (second,) = _dv_files(path) - {first}
    later = int(time.time() * 1000) + 24 * 3600 * 1000
    result = vacuum(Table.open(str(path)).snapshot(), retention_ms=0, force=True, now_ms=later)
    assert first in result.files and _dv_files(path) == {second}
    expected = [i for i in range(130) if i not in (1, 2)]
    assert _ids(Table.open(str(path))) == expected and _oracle(path)["rows"] == len(expected)
    optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())  # purges the vector
    vacuum(Table.open(str(path)).snapshot(), retention_ms=0, force=True, now_ms=later)
    assert _dv_files(path) == set()
    assert _ids(Table.open(str(path))) == expected and _oracle(path)["rows"] == len(expected)


def _in_child(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0 or done.stdout.strip(), done.stderr[-800:]
    return done.stdout


def test_deltalake_rewriting_after_our_delete_keeps_our_rows_deleted(tmp_path: Path) -> None:
    """deltalake's own DELETE copies a file's live rows: the rows our vector deleted stay gone."""
    path = tmp_path / "t"
    table = _table(path)
    table.delete("id = 3 OR id = 60")
    out = _in_child(
        "import sys, json, deltalake\n"
        "print(json.dumps(deltalake.DeltaTable(sys.argv[1]).delete(sys.argv[2])), flush=True)\n",
        str(path),
        "id = 5",
    )
    assert json.loads(out.strip().splitlines()[-1])["num_deleted_rows"] == 1
    expected = [i for i in range(130) if i not in (3, 5, 60)]
    assert _ids(Table.open(str(path))) == expected
    assert _oracle(path)["rows"] == len(expected)
    # and ours after theirs: their rewritten file gets a vector
    assert Table.open(str(path)).delete("id = 6 OR id = 61") is not None
    expected = [i for i in expected if i not in (6, 61)]
    assert _ids(Table.open(str(path))) == expected and _oracle(path)["rows"] == len(expected)


_DELETER = """
import os, sys, time
from txntable.engine.table import Table
from txntable.engine.commit.transaction import CommitOptions
path, row, go = sys.argv[1], sys.argv[2], sys.argv[3]
table = Table.open(path)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.005)
result = table.delete(f"id = {row}", options=CommitOptions(backoff_max_s=0.05))
print("version", result.version, flush=True)
"""


def test_deletes_racing_in_processes_all_land_in_the_same_vector(tmp_path: Path) -> None:
    """Four processes delete one row each of the same file at once: every delete lands (the
    losers conflict, drop their vector file and run again), the file's vector holds all four
    rows, and exactly one vector file per landed commit is left."""
    path = tmp_path / "t"
    _table(path)
    go = tmp_path / "go"
    rows = ["11", "12", "13", "14"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _DELETER, str(path), row, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for row in rows
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    go.touch()
    versions = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-800:]
        versions.append(int(out.split()[-1]))
    assert sorted(versions) == [3, 4, 5, 6]
    table = Table.open(str(path))
    assert _ids(table) == [i for i in range(130) if i not in (11, 12, 13, 14)]
    (dv,) = [a.deletion_vector for a in table.snapshot().add_actions() if a.deletion_vector]
    assert deleted_rows(table.storage, dv.to_json()) == [11, 12, 13, 14]
    assert len(_dv_files(path)) == 4
    assert _oracle(path)["rows"] == 126


def test_our_vectors_survive_a_checkpoint(tmp_path: Path) -> None:
    """deltalake reads the vectors from our checkpoint alone (the commits before it deleted)."""
    path = tmp_path / "t"
    table = _table(path)
    table.delete("id = 3 OR id = 77 OR id = 128")
    write_checkpoint(Table.open(str(path)).snapshot())
    for version in range(3):
        (path / "_delta_log" / f"{version:020d}.json").unlink()
    expected = [i for i in range(130) if i not in (3, 77, 128)]
    assert _ids(Table.open(str(path))) == expected
    assert _oracle(path)["rows"] == len(expected)
