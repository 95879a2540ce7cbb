"""OPTIMIZE on tables with deletion vectors: deleted rows stay deleted, the vectors are purged.

deltalake (through QueryBuilder, which applies deletion vectors, in a child process) reads every
table before and after: same rows, byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import oracle_read
from tests.row_tracking_support import inline_dv
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.model.actions import AddFile, Protocol
from txntable.engine.model.deletion_vectors import deleted_rows
from txntable.engine.table import Table
from txntable.maintenance.batch import inputs_unchanged
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize
from txntable.maintenance.planner import Bin

pytestmark = pytest.mark.integration


def _files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}


def _log(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


@pytest.mark.parametrize("name", ["table-with-dv-small", "basic-dv-with-checkpoint"])
def test_spark_tables_with_deletion_vectors_are_compacted_and_purged(
    table_copy: Any, name: str
) -> None:
    path = table_copy(name)
    before = oracle_read.read(path)
    dv_adds = [
        f for f in Table.open(str(path)).snapshot().files().to_pylist() if f["deletionVector"]
    ]
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.bins_committed >= 1, result.skipped
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    files = Table.open(str(path)).snapshot().files()
    assert files.column("deletionVector").null_count == files.num_rows  # all purged
    lines = _log(path, result.version)
    removes = [line["remove"] for line in lines if "remove" in line]
    assert sum(1 for r in removes if r.get("deletionVector")) == len(dv_adds)
    metrics = next(line for line in lines if "commitInfo" in line)["commitInfo"]
    assert metrics["operationMetrics"]["numDeletionVectorsRemoved"] == str(len(dv_adds))


def test_an_inline_deletion_vector_is_applied(tmp_path: Path) -> None:
    protocol = Protocol(3, 7, ["deletionVectors"], ["deletionVectors", "appendOnly", "invariants"])
    path = tmp_path / "t"
    table = Table.create(str(path), pa.schema([("id", pa.int64())]))
    txn = table.transaction()
    txn.set_protocol(protocol)
    txn.commit("UPGRADE PROTOCOL")
    for start in (0, 10):
        table.append(pa.table({"id": list(range(start, start + 10))}))
    first = next(Table.open(str(path)).snapshot().add_actions())
    dv = inline_dv([1, 3, 8])
    txn = Table.open(str(path)).transaction()
    txn.add(first.to_remove(deletion_timestamp=1, data_change=True))
    txn.add(AddFile.from_json({**first.to_json(), "deletionVector": dv, "dataChange": True}))
    txn.commit("DELETE")
    assert deleted_rows(table.storage, dv) == [1, 3, 8]
    before = oracle_read.read(path)
    assert before["rows"] == 17
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.num_files_removed == 2
    ids = pq.read_table(Table.open(str(path)).snapshot().file_uris()[0]).column("id")
    assert len(ids) == 17 and oracle_read.read(path)["digest"] == before["digest"]


def _inline_dv_table(path: Path) -> Path:
    """A two-file table of ours whose first file has an inline vector deleting 3 of 10 rows."""
    table = Table.create(str(path), pa.schema([("id", pa.int64())]))
    txn = table.transaction()
    txn.set_protocol(
        Protocol(3, 7, ["deletionVectors"], ["deletionVectors", "appendOnly", "invariants"])
    )
    txn.commit("UPGRADE PROTOCOL")
    for start in (0, 10):
        table.append(pa.table({"id": list(range(start, start + 10))}))
    first = next(Table.open(str(path)).snapshot().add_actions())
    txn = Table.open(str(path)).transaction()
    txn.add(first.to_remove(deletion_timestamp=1, data_change=True))
    dv = inline_dv([1, 3, 8])
    txn.add(AddFile.from_json({**first.to_json(), "deletionVector": dv, "dataChange": True}))
    txn.commit("DELETE")
    return path


def _without_num_records(path: Path) -> None:
    """The table's log as a writer that keeps no row counts leaves it: ``numRecords`` taken out
    of every action's statistics (the rest kept), and the checkpoints removed, so readers replay
    these commits (every commit of these tables is still there). The placeholder
    ``table-with-dv-special-char`` keeps for its absolute vector path becomes this copy's."""
    log_dir = path / "_delta_log"
    for f in log_dir.iterdir():
        if ".checkpoint." in f.name or f.name == "_last_checkpoint":
            f.unlink()
    folder = "file:" + quote(str(path / "folder&with%special char"), safe="/&")
    for f in sorted(log_dir.glob("*.json")):
        out = []
        for line in f.read_text().replace("file:{{FOLDER_WITH_SPECIAL_CHAR}}", folder).splitlines():
            action = json.loads(line) if line.strip() else None
            for kind in ("add", "remove"):
                body = action.get(kind) if action else None
                if body and body.get("stats"):
                    stats = json.loads(body["stats"])
                    stats.pop("numRecords", None)
                    body["stats"] = json.dumps(stats)
            out.append(json.dumps(action) if action else line)
        f.write_text("\n".join(out) + "\n")


#: the three storage types of a deletion vector (PROTOCOL.md "Deletion Vector Descriptor")
NO_NUM_RECORDS = {
    "file-vector-one-file": "table-with-dv-small",  # u: 2 of 10 rows deleted
    "absolute-path-vector": "table-with-dv-special-char",  # p: 5 of 10
    "file-vectors-many-commits": "basic-dv-with-checkpoint",  # u: 23 of 250 in each of 2 files
    "inline-vector": None,  # i: 3 of 10 (our own table)
}


@pytest.mark.parametrize("shape", list(NO_NUM_RECORDS))
def test_vectors_of_files_without_num_records_are_purged_by_their_footer_counts(
    table_copy: Any, tmp_path: Path, shape: str
) -> None:
    """Issue 33.3: the purge rule (a vector hiding at least 5% of its file's rows rewrites the
    file whatever its size) needs the file's row count; with no ``numRecords`` in the ``add`` it
    comes from the Parquet footer. ``min_file_size=1`` leaves no file small enough to compact by
    size, so only the purge rule can select them: before, nothing was planned and every vector
    stayed."""
    name = NO_NUM_RECORDS[shape]
    path = table_copy(name) if name else _inline_dv_table(tmp_path / "inline")
    _without_num_records(path)
    before = oracle_read.read(path)
    snapshot = Table.open(str(path)).snapshot()
    dv_adds = [f for f in snapshot.add_actions() if f.deletion_vector]
    assert dv_adds and not any("numRecords" in (f.stats or "") for f in dv_adds)
    deleted = sum(f.deletion_vector.cardinality for f in dv_adds if f.deletion_vector)
    footers = {f.path: pq.read_metadata(_local(path, f.path)).num_rows for f in dv_adds}
    policy = OptimizeOptions(min_file_size=1)
    result = optimize(Table.open(str(path)), policy, ArrowExecutor())
    assert result.error is None and not result.skipped, result.to_json()
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
    live = list(Table.open(str(path)).snapshot().add_actions())
    assert not [f.path for f in live if f.deletion_vector]  # every vector purged
    lines = _log(path, result.version)
    removes = [line["remove"] for line in lines if "remove" in line]
    assert sum(1 for r in removes if r.get("deletionVector")) == len(dv_adds)
    metrics = next(line for line in lines if "commitInfo" in line)["commitInfo"]
    assert metrics["operationMetrics"]["numDeletionVectorsRemoved"] == str(len(dv_adds))
    # the new files hold exactly the rows the vectors kept (the footers' counts less the deleted)
    written = sum(json.loads(a["add"]["stats"])["numRecords"] for a in lines if "add" in a)
    assert written == sum(footers.values()) - deleted


def _local(root: Path, raw: str) -> str:
    from txntable.engine.storage.paths import decode_path

    return decode_path(raw) if raw.startswith("file:") else str(root / decode_path(raw))


def test_a_bin_whose_vector_changed_since_planning_is_stale() -> None:
    dv = {"storageType": "u", "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA", "offset": 1}
    planned = Bin({}, ("a.parquet",), (10,), deletion_vectors=(dv,))
    same = AddFile.from_json(
        {"path": "a.parquet", "partitionValues": {}, "size": 10, "modificationTime": 0,
         "dataChange": True, "deletionVector": {**dv, "sizeInBytes": 3, "cardinality": 1}}
    )  # fmt: skip
    newer = AddFile.from_json({**same.to_json(), "deletionVector": {**dv, "offset": 40}})
    plain = AddFile.from_json({k: v for k, v in same.to_json().items() if k != "deletionVector"})
    assert inputs_unchanged(planned, {"a.parquet": same})
    assert not inputs_unchanged(planned, {"a.parquet": newer})
    assert not inputs_unchanged(planned, {"a.parquet": plain})
    assert not inputs_unchanged(planned, {})


def test_deletion_vector_files_a_reader_cannot_find_leave_the_table_untouched(
    table_copy: Any,
) -> None:
    """partitioned-table-with-dv-large names its vectors with a test prefix Spark's own readers
    are configured for; without them the bins fail and nothing is committed or left behind."""
    path = table_copy("partitioned-table-with-dv-large")
    version = Table.open(str(path)).snapshot().version
    files = _files(path)
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.bins_committed == 0 and result.bins_skipped > 0
    assert all("rewrite failed" in s["reason"] for s in result.skipped)
    assert result.error is not None and result.error.startswith("every bin that ran failed")
    assert Table.open(str(path)).snapshot().version == version
    assert _files(path) == files


def test_a_run_whose_every_bin_fails_exits_non_zero(table_copy: Any) -> None:
    """It used to exit 0 with every bin skipped; bins dropped by other writers still exit 0."""
    import subprocess
    import sys

    path = table_copy("partitioned-table-with-dv-large")
    done = subprocess.run(
        [sys.executable, "-m", "txntable.cli.main", "optimize", str(path), "--executor", "arrow"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    # the summary on stdout, the failure as one error line on stderr
    assert "skipped bin" in done.stdout and "error:" not in done.stdout
    assert done.stderr.startswith("error: every bin that ran failed"), done.stderr
