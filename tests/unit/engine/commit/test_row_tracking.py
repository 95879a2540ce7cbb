"""Row tracking on the commit path: fresh row ids per attempt, the high-water mark, recommits,
the enablement rules, and the pure functions OPTIMIZE and readers use
(engine/commit/row_tracking.py)."""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.row_tracking_support import inline_dv
from tests.unit.case_ids import readable
from tests.unit.txn_support import fast, log_versions, metadata, new_table, raw_commit, read_commit
from txntable.engine.commit import row_tracking as rt
from txntable.engine.commit.conflicts import WinningCommit
from txntable.engine.commit.transaction import Transaction
from txntable.engine.errors import InvalidArgumentError, InvalidCommitError
from txntable.engine.model.actions import AddFile, DeletionVector, DomainMetadata, Protocol
from txntable.engine.table import Table
from txntable.maintenance.executor_arrow import BinResult, BinTask, rewrite_bin
from txntable.maintenance.executor_spark import run_task

FEATURE = "rowTracking"
RT_PROTOCOL = Protocol(1, 7, None, ["appendOnly", "invariants", "domainMetadata", FEATURE])
DV_PROTOCOL = Protocol(
    3,
    7,
    ["deletionVectors"],
    ["appendOnly", "invariants", "domainMetadata", FEATURE, "deletionVectors"],
)
NAMES = {rt.ROW_ID_COLUMN_KEY: "_rid", rt.COMMIT_VERSION_COLUMN_KEY: "_rcv"}
ENABLED = {rt.ENABLE_KEY: "true", **NAMES}


def _add(path: str, records: int | None, part: str = "1") -> AddFile:
    stats = None if records is None else json.dumps({"numRecords": records})
    return AddFile(
        path=path, partition_values={"p": part}, size=10, modification_time=1, stats=stats
    )


def _table(config: dict[str, str] | None = None, protocol: Protocol = RT_PROTOCOL) -> Table:
    return new_table(protocol=protocol, config=config, files=False)


def _adds(table: Table, version: int) -> list[dict[str, Any]]:
    return [line["add"] for line in read_commit(table, version) if "add" in line]


def _mark(table: Table, version: int) -> int | None:
    for line in read_commit(table, version):
        if "domainMetadata" in line and line["domainMetadata"]["domain"] == rt.DOMAIN:
            return int(json.loads(line["domainMetadata"]["configuration"])[rt.HIGH_WATER_MARK_KEY])
    return None


def test_adds_get_consecutive_row_ids_and_the_commit_version() -> None:
    table = _table()
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(_add("p=1/a", 3), _add("p=1/b", 0), _add("p=1/c", 5))
    version = txn.commit("WRITE").version
    adds = _adds(table, version)
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds] == [
        (0, 1),
        (3, 1),
        (3, 1),
    ]
    assert _mark(table, version) == 7
    assert rt.high_water_mark(table.snapshot().domains) == 7
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(_add("p=1/d", 2))
    version = txn.commit("WRITE").version
    assert [a["baseRowId"] for a in _adds(table, version)] == [8]
    assert _mark(table, version) == 9


def test_a_commit_that_lost_the_race_is_renumbered_after_the_winner() -> None:
    table = _table()
    snapshot = table.snapshot()
    loser = Transaction(table, snapshot, fast())
    loser.add(_add("p=1/loser", 4))
    winner = Transaction(table, snapshot, fast())
    winner.add(_add("p=2/winner", 10, "2"))
    assert winner.commit("WRITE").version == 1
    result = loser.commit("WRITE")  # a blind append: no conflict, a second attempt
    assert (result.version, result.attempts) == (2, 2)
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in _adds(table, 2)] == [(10, 2)]
    assert _mark(table, 2) == 13


def test_the_mark_another_writer_reserved_is_respected() -> None:
    table = _table()
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(_add("p=1/a", 1))
    raw_commit(
        table,
        1,
        [DomainMetadata(rt.DOMAIN, json.dumps({rt.HIGH_WATER_MARK_KEY: 999}))],
        {"operation": "ROW TRACKING BACKFILL"},
    )
    assert txn.commit("WRITE").version == 2
    assert [a["baseRowId"] for a in _adds(table, 2)] == [1000]
    assert _mark(table, 2) == 1000


def test_assignment_is_redone_for_every_attempt() -> None:
    table = _table()
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(_add("p=1/a", 2))
    txn.add(_add("p=1/b", 3))
    prepared = txn._prepare()
    assigner = rt.RowTrackingAssigner.for_commit(prepared, table.snapshot())

    def values(version: int) -> list[tuple[int | None, int | None]]:
        return [
            (a.base_row_id, a.default_row_commit_version)
            for a in assigner.actions_at(version)
            if isinstance(a, AddFile)
        ]

    assert values(1) == [(0, 1), (2, 1)]

    mark = DomainMetadata(rt.DOMAIN, json.dumps({rt.HIGH_WATER_MARK_KEY: 41}))
    assigner.observe_winner(WinningCommit(1, [mark]))
    assert values(2) == [(42, 2), (44, 2)]
    domains = [a for a in assigner.actions_at(2) if isinstance(a, DomainMetadata)]
    assert [json.loads(d.configuration) for d in domains] == [{rt.HIGH_WATER_MARK_KEY: 46}]
    # a winner with a lower (stale) mark never lowers it
    assigner.observe_winner(
        WinningCommit(2, [replace(mark, configuration='{"rowIdHighWaterMark":3}')])
    )
    assert values(3) == [(42, 3), (44, 3)]


def test_a_recommitted_file_and_its_remove_keep_their_values() -> None:
    table = _table(protocol=DV_PROTOCOL)
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(_add("p=1/a", 5), _add("p=1/b", 5))
    txn.commit("WRITE")
    live = {a.path: a for a in table.snapshot().add_actions()}
    dv = DeletionVector.from_json(inline_dv([1]))
    txn = Transaction(table, table.snapshot(), fast())
    bare_remove = replace(live["p=1/a"].to_remove(5, True), base_row_id=None)
    bare_remove = replace(bare_remove, default_row_commit_version=None)
    readd = replace(live["p=1/a"], deletion_vector=dv, base_row_id=None)
    readd = replace(readd, default_row_commit_version=None)
    txn.add(bare_remove, readd)
    version = txn.commit("DELETE").version
    lines = read_commit(table, version)
    add = next(line["add"] for line in lines if "add" in line)
    remove = next(line["remove"] for line in lines if "remove" in line)
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (0, 1)
    assert (remove["baseRowId"], remove["defaultRowCommitVersion"]) == (0, 1)
    assert _mark(table, version) is None  # no fresh row id: the mark stays where it was


def test_an_add_without_num_records_is_refused_and_nothing_is_written() -> None:
    table = _table()
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(_add("p=1/a", None))
    with pytest.raises(InvalidCommitError, match="numRecords"):
        txn.commit("WRITE")
    assert log_versions(table) == [0]


def test_suspended_row_tracking_assigns_nothing() -> None:
    table = _table({rt.SUSPENDED_KEY: "true"})
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(_add("p=1/a", None))
    version = txn.commit("WRITE").version
    assert "baseRowId" not in _adds(table, version)[0]
    assert _mark(table, version) is None


def test_tables_without_the_feature_are_untouched() -> None:
    table = new_table(files=False)
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(_add("p=1/a", 3))
    version = txn.commit("WRITE").version
    assert "baseRowId" not in _adds(table, version)[0]
    assert _mark(table, version) is None


def test_a_winner_that_adds_the_feature_makes_the_retry_assign() -> None:
    table = new_table(protocol=Protocol(1, 7, writer_features=["appendOnly"]), files=False)
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(_add("p=1/a", 3))
    raw_commit(table, 1, [RT_PROTOCOL], {"operation": "UPGRADE PROTOCOL"})
    assert txn.commit("WRITE").version == 2
    assert _adds(table, 2)[0]["baseRowId"] == 0 and _mark(table, 2) == 2


def _enable(table: Table, config: dict[str, str], protocol: Protocol | None = None) -> None:
    txn = Transaction(table, table.snapshot(), fast())
    txn.set_metadata(metadata(config=config))
    if protocol is not None:
        txn.set_protocol(protocol)
    txn.commit("SET TBLPROPERTIES")


@pytest.mark.parametrize(
    ("config", "protocol", "message"),
    [
        ({rt.ENABLE_KEY: "true", **NAMES}, Protocol(1, 7, None, ["appendOnly"]), "rowTracking"),
        ({rt.ENABLE_KEY: "true"}, None, "materializedRowIdColumnName"),
        ({rt.ENABLE_KEY: "true", **NAMES, rt.ROW_ID_COLUMN_KEY: "id"}, None, "clash"),
        ({**ENABLED, rt.SUSPENDED_KEY: "true"}, None, "cannot both be true"),
        ({}, Protocol(1, 7, None, ["appendOnly", FEATURE]), "domainMetadata"),
    ],
    ids=readable,
)
def test_bad_enablement_is_refused(
    config: dict[str, str], protocol: Protocol | None, message: str
) -> None:
    start = Protocol(1, 7, None, ["appendOnly"]) if protocol is not None else RT_PROTOCOL
    table = new_table(protocol=start, files=False)
    with pytest.raises(InvalidCommitError, match=message):
        _enable(table, config, protocol)
    assert log_versions(table) == [0]


def test_enabling_needs_row_ids_on_every_live_file() -> None:
    table = new_table(protocol=Protocol(1, 7, None, ["appendOnly"]))  # files without row ids
    upgraded = Protocol(1, 7, None, ["appendOnly", "domainMetadata", FEATURE])
    with pytest.raises(InvalidCommitError, match="backfill"):
        _enable(table, ENABLED, upgraded)
    assert log_versions(table) == [0]
    _enable(table, {}, upgraded)  # supported first: new files get row ids from now on
    assert log_versions(table) == [0, 1]


def test_create_with_row_tracking_sets_the_feature_and_the_column_names() -> None:
    uri = f"memory://rt/{uuid.uuid4().hex}"
    schema = pa.schema([("id", pa.int64())])
    table = Table.create(uri, schema, properties={rt.ENABLE_KEY: "true"})
    snapshot = table.snapshot()
    assert snapshot.protocol.min_writer_version == 7
    assert {"domainMetadata", FEATURE} <= set(snapshot.protocol.writer_features or ())
    columns = rt.MaterializedColumns.of(snapshot.configuration)
    assert columns is not None and columns.row_id != columns.row_commit_version
    assert rt.is_enabled(snapshot.protocol, snapshot.metadata)
    version = table.append(pa.table({"id": [1, 2, 3]})).version
    assert [a.base_row_id for a in table.snapshot().add_actions()] == [0]
    assert rt.high_water_mark(table.snapshot().domains) == 2 and version == 1
    ntz = Table.create(
        f"memory://rt/{uuid.uuid4().hex}",
        pa.schema([("t", pa.timestamp("us"))]),
        properties={rt.ENABLE_KEY: "true"},
    )
    protocol = ntz.snapshot().protocol
    assert protocol.reader_features == ["timestampNtz"]
    assert protocol.writer_features == ["timestampNtz", "domainMetadata", FEATURE]


# -- stable values -----------------------------------------------------------------------------
COLUMNS = rt.MaterializedColumns("_rid", "_rcv")


def test_stable_values_are_materialized_else_base_plus_position() -> None:
    data = pa.table({"x": [1, 2, 3, 4], "_rid": [None, 70, None, 71], "_rcv": [None, 2, 2, None]})
    ids, versions = rt.stable_row_tracking(data, 100, 9, COLUMNS)
    assert ids.to_pylist() == [100, 70, 102, 71]
    assert versions.to_pylist() == [9, 2, 2, 9]
    plain = pa.table({"x": [5, 6]})
    ids, versions = rt.stable_row_tracking(plain, 7, 3, COLUMNS)
    assert (ids.to_pylist(), versions.to_pylist()) == ([7, 8], [3, 3])
    full = pa.table({"x": [1], "_rid": [5], "_rcv": [1]})
    assert rt.stable_row_tracking(full, None, None, COLUMNS)[0].to_pylist() == [5]
    with pytest.raises(InvalidArgumentError, match="no baseRowId"):
        rt.stable_row_tracking(plain, None, 3, COLUMNS)
    attached = COLUMNS.attach(data, 100, 9)
    assert attached.column_names == ["x", "_rid", "_rcv"]
    assert attached.column("_rid").to_pylist() == [100, 70, 102, 71]


def test_preserved_columns_need_enablement_and_names() -> None:
    assert rt.preserved_columns({}) is None
    assert rt.preserved_columns(ENABLED) == COLUMNS
    with pytest.raises(InvalidArgumentError, match="materializedRowIdColumnName"):
        rt.preserved_columns({rt.ENABLE_KEY: "true"})


def test_rewrite_bin_carries_stable_values_past_deletion_vectors(tmp_path: Any) -> None:
    """Row 1 of the first input is deleted: positions are counted before the vector applies."""
    pq.write_table(pa.table({"id": [10, 11, 12]}), tmp_path / "a.parquet")
    pq.write_table(
        pa.table({"id": [20, 21], "_rid": [None, 5], "_rcv": [None, 1]}), tmp_path / "b.parquet"
    )
    dv = inline_dv([1])
    schema = json.dumps(
        {
            "type": "struct",
            "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
        }
    )
    task = BinTask(
        table_uri=str(tmp_path),
        bin_id="b",
        inputs=("a.parquet", "b.parquet"),
        input_bytes=10,
        partition_columns=(),
        partition_values={},
        schema_string=schema,
        configuration=ENABLED,
        target_file_size=1 << 30,
        deletion_vectors=(dv, None),
        base_row_ids=(100, 200),
        row_commit_versions=(3, 4),
    )
    for result in (rewrite_bin(task), rewrite_bin_via_spark_task(task)):
        assert result.ok, result.error
        (add,) = result.adds
        written = pq.read_table(tmp_path / add["path"])
        assert written.column_names == ["id", "_rid", "_rcv"]
        assert written.to_pylist() == [
            {"id": 10, "_rid": 100, "_rcv": 3},
            {"id": 12, "_rid": 102, "_rcv": 3},
            {"id": 20, "_rid": 200, "_rcv": 4},
            {"id": 21, "_rid": 5, "_rcv": 1},
        ]
        assert set(json.loads(add["stats"])["minValues"]) == {"id"}  # hidden columns: no stats
    missing = rewrite_bin(replace(task, base_row_ids=(), row_commit_versions=()))
    assert missing.error is not None and "no baseRowId" in missing.error


@pytest.mark.parametrize("lineage", [False, True], ids=["no-ids", "icebergCompatV3"])
def test_icebergcompatv3_files_carry_iceberg_row_lineage_field_ids(
    tmp_path: Any, lineage: bool
) -> None:
    """Issue 33.7: icebergCompatV3 gives the materialized row id and commit version columns
    Iceberg V3's row lineage field ids in the files (as delta-spark 4.4 writes them), under
    column mapping's ids of the data columns; the values are the same either way."""
    pq.write_table(pa.table({"col-id": pa.array([10, 11], pa.int64())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"col-id": pa.array([20], pa.int64())}), tmp_path / "b.parquet")
    field = {
        "name": "id",
        "type": "long",
        "nullable": True,
        "metadata": {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-id"},
    }
    task = BinTask(
        table_uri=str(tmp_path),
        bin_id="v3",
        inputs=("a.parquet", "b.parquet"),
        input_bytes=10,
        partition_columns=(),
        partition_values={},
        schema_string=json.dumps({"type": "struct", "fields": [field]}),
        configuration={**ENABLED, "delta.columnMapping.mode": "id"},
        target_file_size=1 << 30,
        base_row_ids=(100, 200),
        row_commit_versions=(3, 4),
        row_lineage_ids=lineage,
    )
    for result in (rewrite_bin(task), rewrite_bin_via_spark_task(task)):
        assert result.ok, result.error
        (add,) = result.adds
        written = pq.read_table(tmp_path / add["path"])
        ids = {f.name: (f.metadata or {}).get(b"PARQUET:field_id") for f in written.schema}
        expected = {b"2147483540", b"2147483539"} if lineage else {None}
        assert ids["col-id"] == b"1" and {ids["_rid"], ids["_rcv"]} == expected
        assert written.column("_rid").to_pylist() == [100, 101, 200]
        assert written.column("_rcv").to_pylist() == [3, 3, 4]


def rewrite_bin_via_spark_task(task: BinTask) -> Any:
    """What a Spark task does with the task's JSON form (lists, not tuples)."""
    as_json = json.loads(json.dumps(asdict(task)))
    return BinResult.from_json(run_task(as_json))
